package jsclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// MaxAtomicBatch is the number of messages in an atomic batch that servers
// accept unless configured otherwise (jetstream limits max_batch_size).
const MaxAtomicBatch = 1000

// BatchMsg is one message of an atomic batch.
type BatchMsg struct {
	Subject string
	Data    []byte
	Expect  Expect
	// CheckSubject, when set, is the subject whose last sequence
	// Expect.LastSubjectSeq must be, instead of Subject's.
	CheckSubject string
	// TTL, when set, is the message's Nats-TTL ("1s"); the stream must
	// allow per-message TTLs.
	TTL string
}

// BatchAck is the server's answer to a committed atomic batch: Seq is the
// sequence of its last message, and its Count messages have the sequences
// up to Seq.
type BatchAck struct {
	Seq   uint64
	Count int
}

// Error codes of atomic batch publishes (server 2.12+).
const (
	errBatchDuplicate  = 10201 // a message id is in the dedupe window
	errBatchIncomplete = 10176 // a message of the batch did not arrive, or the batch timed out
	errBatchTooLarge   = 10199
	errBatchInflight   = 10210 // too many batches in flight on the stream or server
	errWrongLastConst  = 10164 // an expectation the batch cannot check (its subject is in flight)
)

// IsBatchDuplicate reports whether a batch was refused because a message
// id of it is in the stream's dedupe window: nothing was stored.
func IsBatchDuplicate(err error) bool { return apiCode(err) == errBatchDuplicate }

// IsBatchRetryable reports whether a batch was refused for a reason that
// another try may not meet (a lost message, too many batches in flight, an
// expectation on a subject that another batch was writing): nothing was
// stored.
func IsBatchRetryable(err error) bool {
	switch apiCode(err) {
	case errBatchIncomplete, errBatchInflight, errWrongLastConst:
		return true
	}
	return false
}

// IsBatchTooLarge reports whether a batch has more messages than the
// server takes in one.
func IsBatchTooLarge(err error) bool { return apiCode(err) == errBatchTooLarge }

func apiCode(err error) int {
	var e *APIError
	if errors.As(err, &e) {
		return e.ErrCode
	}
	return 0
}

// PublishBatch stores msgs atomically (JetStream atomic batch publish,
// server 2.12+): every message or none, with consecutive sequences, each
// message's expectations checked. The messages before the last are sent
// without waiting; the last commits the batch and gets the answer. A
// refusal is an *APIError; see [IsWrongLastSequence], [IsBatchDuplicate],
// [IsBatchRetryable].
func (c *Client) PublishBatch(ctx context.Context, msgs []BatchMsg) (BatchAck, error) {
	if len(msgs) == 0 {
		return BatchAck{}, errors.New("empty batch")
	}
	if err := c.Ready(); err != nil {
		return BatchAck{}, err
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	last := len(msgs) - 1
	for i, bm := range msgs[:last] {
		if err := c.nc.PublishMsg(batchMsg(id, i, bm)); err != nil {
			return BatchAck{}, c.sendErr(err)
		}
	}
	m := batchMsg(id, last, msgs[last])
	m.Header["Nats-Batch-Commit"] = []string{"1"}
	r, err := c.request(ctx, m)
	if err != nil {
		return BatchAck{}, err
	}
	var ack struct {
		pubAck
		Batch string `json:"batch"`
		Count int    `json:"count"`
	}
	if err := json.Unmarshal(r.Data, &ack); err != nil {
		return BatchAck{}, fmt.Errorf("decode batch ack %q: %w", r.Data, err)
	}
	if ack.Error != nil {
		return BatchAck{}, ack.Error
	}
	if ack.Seq == 0 || ack.Batch != id || ack.Count != len(msgs) {
		return BatchAck{}, fmt.Errorf("batch ack %q does not acknowledge batch %s of %d messages", r.Data, id, len(msgs))
	}
	return BatchAck{Seq: ack.Seq, Count: ack.Count}, nil
}

// batchMsg is the i-th message (from 0) of batch id.
func batchMsg(id string, i int, bm BatchMsg) *nats.Msg {
	m := &nats.Msg{Subject: bm.Subject, Data: bm.Data, Header: nats.Header{}}
	m.Header["Nats-Batch-Id"] = []string{id}
	m.Header["Nats-Batch-Sequence"] = []string{strconv.Itoa(i + 1)}
	if bm.Expect.MsgID != "" {
		m.Header["Nats-Msg-Id"] = []string{bm.Expect.MsgID}
	}
	if bm.Expect.CheckLast {
		m.Header["Nats-Expected-Last-Subject-Sequence"] = []string{strconv.FormatUint(bm.Expect.LastSubjectSeq, 10)}
		if bm.CheckSubject != "" {
			m.Header["Nats-Expected-Last-Subject-Sequence-Subject"] = []string{bm.CheckSubject}
		}
	}
	if bm.TTL != "" {
		m.Header["Nats-TTL"] = []string{bm.TTL}
	}
	return m
}
