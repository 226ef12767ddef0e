package nats

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/varve-go/varve"
)

// Header names of JetStream's publish checks.
const (
	hdrMsgID         = "Nats-Msg-Id"
	hdrExpectLastSub = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectLastID  = "Nats-Expected-Last-Msg-Id"
)

// probeLastID is never a message id, so a probe that carries it as the
// expected last message id is refused after the server's dedupe check.
var probeLastID = "varve-probe-" + nuid.Next()

// freshMargin is how much younger than the dedupe window a UUIDv7 first id
// must be for the server's dedupe check alone to decide whether an append
// is a retry; it absorbs clock skew between clients and server.
const freshMargin = 30 * time.Second

// Append implements varve.Backend. A commit is one message (or, above the
// server's max_payload, one message listing chunk messages), published
// with Nats-Expected-Last-Subject-Sequence set to the last sequence of the
// stream's subject as the backend knows it, and a Nats-Msg-Id made of the
// first event id, the stream and its incarnation.
func (b *Backend) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	if err := b.ready(ctx); err != nil {
		return varve.AppendResult{}, err
	}
	enc := encodeID(req.Stream)
	a := &appendOp{b: b, req: req, enc: enc, subj: b.evPrefix + enc}
	res, err := a.run(ctx)
	if len(a.chunks) > 0 && (err != nil || a.orphans) {
		a.dropChunks(ctx)
	}
	if err != nil && !isOutcome(err) && ctx.Err() == nil {
		err = fmt.Errorf("nats: append to %q: %w", req.Stream, err)
	}
	return res, err
}

// isOutcome reports whether err is an answer about the stream rather than
// a failure to get one.
func isOutcome(err error) bool {
	return errors.Is(err, varve.ErrWrongExpectedVersion) || errors.Is(err, varve.ErrStreamDeleted) ||
		errors.Is(err, varve.ErrDuplicateEvent) || errors.Is(err, varve.ErrClosed)
}

type appendOp struct {
	b         *Backend
	req       varve.AppendRequest
	enc, subj string
	body      []byte   // state header + encoded events
	chunks    []uint64 // sequences of the chunks published for this append
	orphans   bool     // the chunks are not referenced by a stored commit
	idSuffix  string   // set when the original message id is taken by events no longer stored
	searched  bool     // the history was searched for the first id
}

func (a *appendOp) run(ctx context.Context) (varve.AppendResult, error) {
	b, req := a.b, a.req
	a.body = appendEvents(make([]byte, stateLen, stateLen+eventsSize(req.Events)), req.Events)
	// fresh: h was read from the server during this call. A cached head, or
	// the empty head guessed for a new stream, is read again before a
	// conflict is reported; a wrong guess costs the publish a retry.
	h, cached := b.cachedHead(req.Stream)
	fresh := false
	if !cached && req.Expected != varve.NoStream {
		if err := a.refresh(ctx, &h); err != nil {
			return varve.AppendResult{}, err
		}
		fresh = true
	}
	for {
		if err := ctx.Err(); err != nil {
			return varve.AppendResult{}, err
		}
		if h.st.kind == kindTombstone {
			return varve.AppendResult{}, varve.ErrStreamDeleted
		}
		if !req.Expected.Matches(h.version()) {
			if !fresh {
				if err := a.refresh(ctx, &h); err != nil {
					return varve.AppendResult{}, err
				}
				fresh = true
				continue
			}
			return a.conflict(ctx, h)
		}
		if (req.Expected == varve.Any || req.Expected == varve.StreamExists) && !a.searched && !a.fresh() && h.exists() {
			// An old id: a retry from beyond the dedupe window would
			// append the events again. Look for them first.
			a.searched = true
			if res, ok, err := a.searchHistory(ctx, h, true); err != nil || ok {
				return res, err
			}
		}
		ack, st, err := a.publish(ctx, h)
		if err != nil {
			return varve.AppendResult{}, err
		}
		switch {
		case ack.Error == nil && !ack.Duplicate:
			n := len(req.Events)
			nh := head{seq: ack.Seq, st: st, first: st.version - uint64(n) + 1, n: n}
			b.remember(req.Stream, nh)
			return varve.AppendResult{FirstVersion: nh.first, LastVersion: st.version, Position: nh.lastPos()}, nil
		case ack.Error == nil:
			a.orphans = true
			res, ok, err := a.original(ctx, ack.Seq, h)
			if ok || err != nil {
				return res, err
			}
			// The original commit is gone (truncated): this is a new append,
			// under a message id of its own.
			a.idSuffix = "~" + strconv.FormatUint(ack.Seq, 10)
		case ack.Error.ErrCode == errWrongLastSequence:
			if err := a.refresh(ctx, &h); err != nil {
				return varve.AppendResult{}, err
			}
			fresh = true
		default:
			return varve.AppendResult{}, fmt.Errorf("publish commit: %w", ack.Error)
		}
	}
}

func (a *appendOp) refresh(ctx context.Context, h *head) error {
	nh, _, err := a.b.fetchHead(ctx, a.req.Stream, a.subj)
	if err != nil {
		return fmt.Errorf("read head: %w", err)
	}
	*h = nh
	return nil
}

func (a *appendOp) msgID(h head) string {
	id := a.req.Events[0].ID
	var buf [32]byte
	hex.Encode(buf[:], id[:])
	return string(buf[:]) + ":" + strconv.FormatUint(h.incarnation(), 10) + ":" + a.enc + a.idSuffix
}

// publish sends the commit at the version after h, expecting h to be the
// subject's last message.
func (a *appendOp) publish(ctx context.Context, h head) (pubAck, state, error) {
	b := a.b
	now := time.Now().UnixNano()
	cur := h.version()
	st := state{
		kind:        kindCommit,
		version:     cur + uint64(len(a.req.Events)),
		created:     h.st.created,
		updated:     now,
		incarnation: h.incarnation(),
		prev:        h.seq,
	}
	if h.st.kind != kindDeleted {
		st.floor = h.st.floor
	}
	if cur == 0 || st.created == 0 {
		st.created = now
	}
	m := &natsgo.Msg{Subject: a.subj, Header: natsgo.Header{}}
	id := a.msgID(h)
	m.Header[hdrMsgID] = []string{id}
	m.Header[hdrExpectLastSub] = []string{strconv.FormatUint(h.seq, 10)}
	if len(a.body)+len(id)+len(a.subj)+256 <= b.maxPayload {
		putState(a.body, st)
		m.Data = a.body
	} else {
		st.kind = kindChunked
		ref, err := a.publishChunks(ctx, h)
		if err != nil {
			return pubAck{}, st, err
		}
		m.Data = appendChunkRef(make([]byte, stateLen, stateLen+16+10*len(ref.seqs)), ref)
		putState(m.Data, st)
	}
	ack, err := b.publish(ctx, m)
	if err != nil {
		return pubAck{}, st, fmt.Errorf("publish commit: %w", err)
	}
	return ack, st, nil
}

// publishChunks stores the encoded events in chunks on the stream's chunk
// subject. Every chunk of a commit must come after the message the commit
// expects as its predecessor: truncation relies on it when it purges the
// chunks of removed commits.
func (a *appendOp) publishChunks(ctx context.Context, h head) (chunkRef, error) {
	b := a.b
	payload := a.body[stateLen:]
	if len(a.chunks) > 0 && a.chunks[0] <= h.seq {
		a.dropChunks(ctx)
	}
	if len(a.chunks) == 0 {
		size := b.maxPayload - 512
		if size < 4096 {
			return chunkRef{}, fmt.Errorf("server max_payload %d is too small: %w", b.maxPayload, varve.ErrInvalidArgument)
		}
		for off := 0; off < len(payload); off += size {
			end := min(off+size, len(payload))
			ack, err := b.publish(ctx, &natsgo.Msg{Subject: b.chPrefix + a.enc, Data: payload[off:end]})
			if err == nil && ack.Error != nil {
				err = ack.Error
			}
			if err != nil {
				return chunkRef{}, fmt.Errorf("publish chunk: %w", err)
			}
			a.chunks = append(a.chunks, ack.Seq)
		}
	}
	return chunkRef{events: len(a.req.Events), size: len(payload), seqs: a.chunks}, nil
}

func (a *appendOp) dropChunks(ctx context.Context) {
	dctx, cancel := a.b.cleanupCtx(ctx)
	defer cancel()
	for _, seq := range a.chunks {
		_ = a.b.deleteMsg(dctx, seq) // a leftover is purged with the stream's next delete
	}
	a.chunks = nil
}

// conflict handles an expectation that h does not meet: unless the append
// is a retry of a stored one, it fails with the actual version.
func (a *appendOp) conflict(ctx context.Context, h head) (varve.AppendResult, error) {
	res, ok, err := a.findOriginal(ctx, h)
	if err != nil || ok {
		return res, err
	}
	return varve.AppendResult{}, &varve.WrongExpectedVersionError{Stream: a.req.Stream, Expected: a.req.Expected, Actual: h.version()}
}

// findOriginal looks for a stored append with the same first event id:
// first with a dedupe probe (a publish that the server answers with the
// original sequence if the message id is in its dedupe window, and refuses
// otherwise, storing nothing), then, if the id may be older than the
// window, in the subject's history.
func (a *appendOp) findOriginal(ctx context.Context, h head) (varve.AppendResult, bool, error) {
	b := a.b
	m := &natsgo.Msg{Subject: a.subj, Header: natsgo.Header{}, Data: []byte{formatV1, kindProbe}}
	m.Header[hdrMsgID] = []string{a.msgID(h)}
	m.Header[hdrExpectLastID] = []string{probeLastID}
	ack, err := b.publish(ctx, m)
	switch {
	case err != nil:
		return varve.AppendResult{}, false, fmt.Errorf("dedupe probe: %w", err)
	case ack.Error == nil && ack.Duplicate:
		return a.original(ctx, ack.Seq, h)
	case ack.Error == nil:
		return varve.AppendResult{}, false, fmt.Errorf("dedupe probe was stored at %d", ack.Seq)
	case ack.Error.ErrCode != errWrongLastMsgID:
		return varve.AppendResult{}, false, fmt.Errorf("dedupe probe: %w", ack.Error)
	}
	if a.fresh() {
		return varve.AppendResult{}, false, nil
	}
	return a.searchHistory(ctx, h, false)
}

// fresh reports whether the first event id is a UUIDv7 younger than the
// dedupe window: the server knows every message id that recent, so no
// stored append with it can be missed by its dedupe check.
func (a *appendOp) fresh() bool {
	t, ok := v7Time(a.req.Events[0].ID)
	return ok && time.Since(t) < a.b.cfg.DuplicateWindow-freshMargin
}

// searchHistory scans the stream's current incarnation, up to h, for the
// commit that holds the first event id. For a UUIDv7 id the scan starts
// at the id's time; other ids are searched from the incarnation's start,
// unless v7Only.
func (a *appendOp) searchHistory(ctx context.Context, h head, v7Only bool) (varve.AppendResult, bool, error) {
	b := a.b
	if !h.exists() {
		return varve.AppendResult{}, false, nil
	}
	first := a.req.Events[0].ID
	start := scanStart{seq: h.incarnation() + 1, end: h.seq}
	if t, ok := v7Time(first); ok {
		start.time = t.Add(-freshMargin)
	} else if v7Only {
		return varve.AppendResult{}, false, nil
	}
	var found rawMsg
	err := b.scan(ctx, a.subj, start, func(m scanMsg) (bool, error) {
		if m.seq > h.seq {
			return false, nil
		}
		st, err := getState(m.data)
		if err != nil || !st.isCommit() || st.incarnation != h.incarnation() {
			return err == nil && m.seq < h.seq, err
		}
		p, err := b.payload(ctx, m.rawMsg, st)
		if err != nil {
			return false, err
		}
		if idx, err := indexOf(p, first); err != nil || idx >= 0 {
			found = m.rawMsg
			return false, err
		}
		return m.seq < h.seq, nil
	})
	if err != nil {
		return varve.AppendResult{}, false, fmt.Errorf("search history for event %s: %w", first, err)
	}
	if found.seq == 0 {
		return varve.AppendResult{}, false, nil
	}
	return a.compare(ctx, found, h)
}

// original fetches the commit at seq that holds the request's first event
// id and compares it with the request.
func (a *appendOp) original(ctx context.Context, seq uint64, h head) (varve.AppendResult, bool, error) {
	m, found, err := a.b.getSeq(ctx, seq)
	if err != nil {
		return varve.AppendResult{}, false, fmt.Errorf("read original commit %d: %w", seq, err)
	}
	if !found || m.subject != a.subj {
		return varve.AppendResult{}, false, nil
	}
	return a.compare(ctx, m, h)
}

// compare checks that the request's events are the stored events from its
// first id on, one for one, and returns the original result. ok is false
// when the first id is not (or no longer) in the stream.
func (a *appendOp) compare(ctx context.Context, m rawMsg, h head) (varve.AppendResult, bool, error) {
	b, req := a.b, a.req
	st, err := getState(m.data)
	if err != nil || !st.isCommit() || st.incarnation != h.incarnation() {
		return varve.AppendResult{}, false, err
	}
	p, err := b.payload(ctx, m, st)
	if err != nil {
		return varve.AppendResult{}, false, err
	}
	stored, err := emit(nil, p, req.Stream, m.seq, st, 0, 0, st.version, 1<<31)
	if err != nil {
		return varve.AppendResult{}, false, err
	}
	idx := -1
	for i := range stored {
		if stored[i].ID == req.Events[0].ID {
			idx = i
			break
		}
	}
	if idx < 0 || stored[idx].Version < h.st.floor {
		return varve.AppendResult{}, false, nil
	}
	stored = stored[idx:]
	if len(stored) < len(req.Events) {
		more, err := b.ReadStream(ctx, varve.StreamQuery{
			Stream: req.Stream, From: st.version + 1, Limit: len(req.Events) - len(stored),
		}, stored)
		if err != nil && !errors.Is(err, varve.ErrStreamNotFound) {
			return varve.AppendResult{}, false, err
		}
		stored = more
	}
	dup := fmt.Errorf("%w: event %s is at version %d of %q", varve.ErrDuplicateEvent, req.Events[0].ID, stored[0].Version, req.Stream)
	if len(stored) < len(req.Events) {
		return varve.AppendResult{}, true, dup
	}
	for i := range req.Events {
		if stored[i].ID != req.Events[i].ID {
			return varve.AppendResult{}, true, dup
		}
	}
	last := stored[len(req.Events)-1]
	return varve.AppendResult{FirstVersion: stored[0].Version, LastVersion: last.Version, Position: last.Position}, true, nil
}

// indexOf returns the index of the event with the given id in an encoded
// events payload, or -1.
func indexOf(payload []byte, id [16]byte) (int, error) {
	r, err := newEventReader(payload)
	if err != nil {
		return -1, err
	}
	var e varve.RecordedEvent
	for i := 0; r.n > 0; i++ {
		if err := r.next(&e, true); err != nil {
			return -1, err
		}
		if e.ID == id {
			return i, nil
		}
	}
	return -1, nil
}
