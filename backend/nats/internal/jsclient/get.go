package jsclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Msg is a stored message.
type Msg struct {
	Seq     uint64
	Subject string
	Data    []byte
}

// directGet asks for one message; found is false when there is none.
func (c *Client) directGet(ctx context.Context, req string) (Msg, bool, error) {
	r, err := c.request(ctx, &nats.Msg{Subject: c.direct, Data: []byte(req)})
	if err != nil {
		return Msg{}, false, err
	}
	if st := r.Header.Get("Status"); st != "" {
		if st == "404" {
			return Msg{}, false, nil
		}
		return Msg{}, false, fmt.Errorf("direct get: status %s %s", st, r.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(r.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return Msg{}, false, fmt.Errorf("direct get: bad sequence header: %w", err)
	}
	return Msg{Seq: seq, Subject: r.Header.Get("Nats-Subject"), Data: r.Data}, true, nil
}

// Get returns the message with sequence seq, of any subject.
func (c *Client) Get(ctx context.Context, seq uint64) (Msg, bool, error) {
	return c.directGet(ctx, `{"seq":`+strconv.FormatUint(seq, 10)+`}`)
}

// GetLast returns the last message of subject (a wildcard is allowed).
func (c *Client) GetLast(ctx context.Context, subject string) (Msg, bool, error) {
	return c.directGet(ctx, `{"last_by_subj":"`+subject+`"}`)
}

// GetNext returns the first message of subject (a wildcard is allowed)
// with a sequence of seq or more. It depends on no consumer's state, so
// it is how a scan proves that nothing lies between two messages.
func (c *Client) GetNext(ctx context.Context, seq uint64, subject string) (Msg, bool, error) {
	return c.directGet(ctx, `{"seq":`+strconv.FormatUint(seq, 10)+`,"next_by_subj":"`+subject+`"}`)
}

// MaxBatch bounds the messages of one batched direct get.
const MaxBatch = 1024

// batchRequest is the body of a batched direct get.
type batchRequest struct {
	Seq      uint64 `json:"seq"`
	NextFor  string `json:"next_by_subj"`
	Batch    int    `json:"batch"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// cursorBatchBytes bounds the data of one batch of a cursor, which may
// keep it between calls.
const cursorBatchBytes = 8 << 20

// batch is one batched direct get in flight, its replies going to ch.
type batch struct {
	c    *Client
	sub  *nats.Subscription
	ch   chan *nats.Msg
	subj string
}

func (c *Client) openBatch(subject string, n int) (*batch, error) {
	if err := c.Ready(); err != nil {
		return nil, err
	}
	b := &batch{c: c, ch: make(chan *nats.Msg, n+8), subj: subject}
	var err error
	if b.sub, err = c.nc.ChanSubscribe(c.nc.NewInbox(), b.ch); err != nil {
		return nil, c.sendErr(err)
	}
	return b, nil
}

func (b *batch) close() { _ = b.sub.Unsubscribe() }

// send asks for up to n messages of the subject from sequence from, and
// at most maxBytes of data if that is not 0.
func (b *batch) send(from uint64, n, maxBytes int) error {
	data, err := json.Marshal(batchRequest{Seq: max(from, 1), NextFor: b.subj, Batch: n, MaxBytes: maxBytes})
	if err != nil {
		return err
	}
	b.c.requests.Add(1)
	if err := b.c.nc.PublishRequest(b.c.direct, b.sub.Subject, data); err != nil {
		return b.c.sendErr(err)
	}
	return nil
}

// read collects the replies to one send. complete is true when the server
// said that no message of the subject follows the last one returned (or
// that there is none from the request's sequence on). It returns
// ErrNoBatch if the server answered with a plain direct get.
func (b *batch) read(ctx context.Context, out []Msg) (_ []Msg, complete bool, err error) {
	w := b.c.waiter(ctx, b.c.timeout)
	defer w.release()
	start := len(out)
	for {
		m, err := w.wait(b.ch)
		if err != nil {
			return out, false, err
		}
		w.restart()
		switch status := m.Header.Get("Status"); status {
		case "":
		case "404":
			return out, len(out) == start, nil
		case "204": // end of batch
			return out, m.Header.Get("Nats-Num-Pending") == "0", nil
		default:
			return out, false, fmt.Errorf("batched direct get: status %s %s", status, m.Header.Get("Description"))
		}
		pendingHdr := m.Header.Get("Nats-Num-Pending")
		if pendingHdr == "" {
			if len(out) == start {
				b.c.batch.Store(false)
				return out, false, ErrNoBatch
			}
			return out, false, fmt.Errorf("batched direct get: reply without pending count")
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return out, false, fmt.Errorf("batched direct get: bad headers %v", m.Header)
		}
		out = append(out, Msg{Seq: seq, Subject: m.Header.Get("Nats-Subject"), Data: m.Data})
	}
}

// GetBatch returns up to n messages of subject from sequence from with one
// batched direct get (2.11+; ErrNoBatch before). complete is true when the
// server said that no message of the subject follows the last one
// returned (or that there is none from from on): the batch then ends at
// the subject's last message.
func (c *Client) GetBatch(ctx context.Context, subject string, from uint64, n int) (msgs []Msg, complete bool, err error) {
	b, err := c.openBatch(subject, n)
	if err != nil {
		return nil, false, err
	}
	defer b.close()
	if err := b.send(from, n, 0); err != nil {
		return nil, false, err
	}
	return b.read(ctx, nil)
}

// consumerConfig is the configuration of a scan's push consumer.
type consumerConfig struct {
	Name              string        `json:"name,omitempty"`
	DeliverSubject    string        `json:"deliver_subject"`
	DeliverPolicy     string        `json:"deliver_policy"`
	OptStartSeq       uint64        `json:"opt_start_seq,omitempty"`
	AckPolicy         string        `json:"ack_policy"`
	AckWait           time.Duration `json:"ack_wait"`
	MaxAckPending     int           `json:"max_ack_pending"`
	FilterSubject     string        `json:"filter_subject"`
	ReplayPolicy      string        `json:"replay_policy"`
	InactiveThreshold time.Duration `json:"inactive_threshold"`
	IdleHeartbeat     time.Duration `json:"idle_heartbeat"`
	MemoryStorage     bool          `json:"mem_storage"`
	Replicas          int           `json:"num_replicas"`
}
