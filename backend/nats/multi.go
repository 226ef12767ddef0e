package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
	"github.com/varve-go/varve/internal/backoff"
)

// checkTTL is how long the message of a check stays in the stream: the
// shortest per-message TTL the server takes.
const checkTTL = "1s"

// batchRetries bounds the rounds of a multi-stream append that the server
// refuses for a reason that is not the streams' (a batch lost on the way,
// too many batches in flight).
const batchRetries = 50

// MultiAppendAvailable implements varve.MultiAppender: the backend appends
// to several streams atomically when the server has atomic batch publishes
// (2.12+) and the stream allows them.
func (b *Backend) MultiAppendAvailable() bool { return b.multiErr == nil }

// AppendMulti implements varve.MultiAppender with one JetStream atomic
// batch: a message on <prefix>.k for each check (expecting the checked
// stream's last subject sequence through
// Nats-Expected-Last-Subject-Sequence-Subject, and gone after a TTL of 1 s),
// then each part's commit as a single append publishes it, with its own
// expected last subject sequence and message id. The server stores all of
// them with consecutive sequences, or none. Each part is decided as a
// single append is (id sets, retries, tombstones) against the heads the
// batch expects; a refused batch makes the backend read every head again.
func (b *Backend) AppendMulti(ctx context.Context, req varve.MultiAppendRequest) ([]varve.AppendResult, error) {
	if err := b.ready(ctx); err != nil {
		return nil, err
	}
	if b.multiErr != nil {
		return nil, b.multiErr
	}
	if n := len(req.Appends) + len(req.Checks); n > jsclient.MaxAtomicBatch {
		return nil, fmt.Errorf("nats: %d streams in one atomic batch, the server takes %d: %w", n, jsclient.MaxAtomicBatch, varve.ErrInvalidArgument)
	}
	m := &multiOp{b: b, ops: make([]*appendOp, len(req.Appends)), checks: make([]checkOp, len(req.Checks))}
	for i, p := range req.Appends {
		r := varve.AppendRequest{Stream: p.Stream, Expected: p.Expected, Events: p.Events}
		if i < len(req.Categories) {
			r.Category = req.Categories[i]
		}
		if r.Category != "" && r.Category != categoryOf(r.Stream, b.sep) {
			return nil, fmt.Errorf("nats: category %q of stream %q is not the stream's at separator %q (the Store's CategorySeparator must be the backend's): %w",
				r.Category, r.Stream, b.sep, varve.ErrInvalidArgument)
		}
		enc := b.token(r.Stream)
		m.ops[i] = &appendOp{b: b, req: r, enc: enc, subj: b.evPrefix + enc}
	}
	for i, c := range req.Checks {
		m.checks[i] = checkOp{stream: c.Stream, subj: b.subject(c.Stream), exp: c.Expected}
	}
	res, err := m.run(ctx)
	for _, a := range m.ops {
		if len(a.chunks) > 0 && !a.stored && !a.unsure {
			a.dropChunks(ctx)
		}
	}
	return res, b.fail("", err)
}

type multiOp struct {
	b      *Backend
	ops    []*appendOp
	checks []checkOp
}

// checkOp is the check of a stream that a multi-stream append does not
// write: h is its head as the append knows it, fresh when read during the
// call.
type checkOp struct {
	stream, subj string
	exp          varve.ExpectedVersion
	h            head
	fresh        bool
}

func (c *checkOp) refresh(ctx context.Context, b *Backend) error {
	h, _, err := b.fetchHead(ctx, c.stream, c.subj)
	if err != nil {
		return fmt.Errorf("read head: %w", err)
	}
	c.h, c.fresh = h, true
	return nil
}

// decide checks the expectation against the head, read again before it
// reports a failure.
func (c *checkOp) decide(ctx context.Context, b *Backend) error {
	for {
		failed := c.h.st.kind == kindTombstone || !c.exp.Matches(c.h.version())
		switch {
		case !failed:
			return nil
		case !c.fresh:
			if err := c.refresh(ctx, b); err != nil {
				return err
			}
		case c.h.st.kind == kindTombstone:
			return varve.ErrStreamDeleted
		default:
			return &varve.WrongExpectedVersionError{Stream: c.stream, Expected: c.exp, Actual: c.h.version()}
		}
	}
}

func (m *multiOp) run(ctx context.Context) ([]varve.AppendResult, error) {
	for _, a := range m.ops {
		a.begin()
	}
	for i := range m.checks {
		c := &m.checks[i]
		h, cached := m.b.streams.head(c.stream)
		c.h = h
		if !cached && c.exp != varve.NoStream {
			if err := c.refresh(ctx, m.b); err != nil {
				return nil, partError(c.stream, err)
			}
		}
	}
	res := make([]varve.AppendResult, len(m.ops))
	retried := make([]bool, len(m.ops))
	dups, refusals := 0, 0
	for {
		retries := 0
		for i, a := range m.ops {
			r, done, err := a.decide(ctx)
			if err != nil {
				return nil, partError(a.req.Stream, err)
			}
			res[i], retried[i] = r, done
			if done {
				retries++
			}
		}
		for i := range m.checks {
			c := &m.checks[i]
			if retries == len(m.ops) && !c.fresh {
				// A retry is answered without a publish: its checks must
				// hold at the streams' current heads.
				if err := c.refresh(ctx, m.b); err != nil {
					return nil, partError(c.stream, err)
				}
			}
			if err := c.decide(ctx, m.b); err != nil {
				return nil, partError(c.stream, err)
			}
		}
		switch retries {
		case len(m.ops):
			return res, nil
		case 0:
		default:
			for i, a := range m.ops {
				if retried[i] {
					return nil, &varve.StreamError{Stream: a.req.Stream,
						Err: fmt.Errorf("the events of this stream were appended before, the others were not: %w", varve.ErrDuplicateEvent)}
				}
			}
		}
		ack, sts, err := m.publish(ctx)
		switch {
		case err == nil:
			for i, a := range m.ops {
				res[i] = a.committed(ack.Seq-uint64(len(m.ops)-1-i), sts[i])
			}
			return res, nil
		case jsclient.IsWrongLastSequence(err):
			// A head the batch expected has moved: read them all again,
			// so that a failed expectation is reported on a fresh head.
		case jsclient.IsBatchDuplicate(err):
			// A message id of the batch is in the dedupe window: a batch
			// whose reply was lost, found as a retry on fresh heads. If
			// it is not (its events were truncated or deleted since), the
			// parts go out under message ids of their own.
			if dups++; dups > 1 {
				for _, a := range m.ops {
					a.idSuffix = "~" + strconv.FormatUint(a.h.seq, 10) + "." + strconv.Itoa(dups)
				}
			}
		case jsclient.IsBatchRetryable(err):
			if refusals++; refusals > batchRetries {
				return nil, err
			}
			if err := backoff.Sleep(ctx, time.Duration(refusals)*time.Millisecond); err != nil {
				return nil, err
			}
		case jsclient.IsBatchTooLarge(err):
			return nil, fmt.Errorf("%w: %w", err, varve.ErrInvalidArgument)
		default:
			return nil, err
		}
		if err := m.refresh(ctx); err != nil {
			return nil, err
		}
	}
}

// refresh reads the head of every stream of the append.
func (m *multiOp) refresh(ctx context.Context) error {
	for _, a := range m.ops {
		if err := a.refresh(ctx); err != nil {
			return partError(a.req.Stream, err)
		}
	}
	for i := range m.checks {
		if err := m.checks[i].refresh(ctx, m.b); err != nil {
			return partError(m.checks[i].stream, err)
		}
	}
	return nil
}

// publish sends the checks and the commits as one atomic batch, each
// commit at the version after its part's head; sts are the commits'
// states.
func (m *multiOp) publish(ctx context.Context) (jsclient.BatchAck, []state, error) {
	b := m.b
	msgs := make([]jsclient.BatchMsg, 0, len(m.checks)+len(m.ops))
	for _, c := range m.checks {
		msgs = append(msgs, jsclient.BatchMsg{
			Subject:      b.checkSubj,
			Expect:       jsclient.Expect{LastSubjectSeq: c.h.seq, CheckLast: true},
			CheckSubject: c.subj,
			TTL:          checkTTL,
		})
	}
	sts := make([]state, len(m.ops))
	for i, a := range m.ops {
		data, st, exp, err := a.message(ctx, a.h)
		if err != nil {
			return jsclient.BatchAck{}, nil, partError(a.req.Stream, err)
		}
		sts[i] = st
		msgs = append(msgs, jsclient.BatchMsg{Subject: a.subj, Data: data, Expect: exp})
	}
	ack, err := b.c.PublishBatch(ctx, msgs)
	b.committed(err)
	if err != nil {
		var refused *jsclient.APIError
		if !errors.As(err, &refused) {
			for i, a := range m.ops {
				a.unsure = a.unsure || sts[i].kind == kindChunked
			}
		}
		return jsclient.BatchAck{}, nil, fmt.Errorf("publish batch: %w", err)
	}
	return ack, sts, nil
}

// partError names the stream of a failed part: a conflict names it
// already, and a context error stays bare.
func partError(stream string, err error) error {
	var wev *varve.WrongExpectedVersionError
	switch {
	case errors.As(err, &wev):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case isOutcome(err):
		return &varve.StreamError{Stream: stream, Err: err}
	}
	return fmt.Errorf("stream %q: %w", stream, err)
}
