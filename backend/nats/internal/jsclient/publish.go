package jsclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Expect is what a publish asks the server to check before it stores the
// message.
type Expect struct {
	// MsgID is the Nats-Msg-Id: within the stream's dedupe window the
	// server stores a message with a known id only once.
	MsgID string
	// LastSubjectSeq, when CheckLast is set, must be the sequence of the
	// subject's last message (0: the subject has none).
	LastSubjectSeq uint64
	CheckLast      bool
}

// Ack is the server's answer to a stored (or deduplicated) publish.
type Ack struct {
	Seq uint64
	// Duplicate: the dedupe window holds a message with the publish's
	// MsgID, at Seq; nothing was stored.
	Duplicate bool
}

type pubAck struct {
	Seq       uint64    `json:"seq"`
	Duplicate bool      `json:"duplicate"`
	Error     *APIError `json:"error"`
}

// Publish stores data on subject. A refusal of the server (a failed
// expectation, say) is an *APIError; see [IsWrongLastSequence].
func (c *Client) Publish(ctx context.Context, subject string, data []byte, exp Expect) (Ack, error) {
	m := &nats.Msg{Subject: subject, Data: data}
	if exp.MsgID != "" || exp.CheckLast {
		m.Header = nats.Header{}
		if exp.MsgID != "" {
			m.Header["Nats-Msg-Id"] = []string{exp.MsgID}
		}
		if exp.CheckLast {
			m.Header["Nats-Expected-Last-Subject-Sequence"] = []string{strconv.FormatUint(exp.LastSubjectSeq, 10)}
		}
	}
	r, err := c.request(ctx, m)
	if err != nil {
		return Ack{}, err
	}
	var ack pubAck
	if err := json.Unmarshal(r.Data, &ack); err != nil {
		return Ack{}, fmt.Errorf("decode publish ack %q: %w", r.Data, err)
	}
	if ack.Error != nil {
		return Ack{}, ack.Error
	}
	if ack.Seq == 0 {
		return Ack{}, fmt.Errorf("publish ack without sequence: %q", r.Data)
	}
	return Ack{Seq: ack.Seq, Duplicate: ack.Duplicate}, nil
}

// Purge removes the messages of subject with sequences below before.
func (c *Client) Purge(ctx context.Context, subject string, before uint64) error {
	if before <= 1 {
		return nil // server 2.9 reads a purge below 1 as a purge of everything
	}
	var resp struct {
		Error *APIError `json:"error"`
	}
	req := struct {
		Filter string `json:"filter"`
		Seq    uint64 `json:"seq"`
	}{subject, before}
	if err := c.api(ctx, "STREAM.PURGE."+c.stream, req, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	return nil
}

// Delete removes the message with sequence seq, if it is still stored.
func (c *Client) Delete(ctx context.Context, seq uint64) error {
	var resp struct {
		Error *APIError `json:"error"`
	}
	req := struct {
		Seq     uint64 `json:"seq"`
		NoErase bool   `json:"no_erase"`
	}{seq, true}
	if err := c.api(ctx, "STREAM.MSG.DELETE."+c.stream, req, &resp); err != nil {
		return err
	}
	if resp.Error != nil && resp.Error.Code != 404 {
		return resp.Error
	}
	return nil
}
