package nats

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// Append implements varve.Backend. A commit is one message (or, above the
// server's max_payload, one message listing chunk messages), published
// with Nats-Expected-Last-Subject-Sequence set to the last sequence of the
// stream's subject as the backend knows it, and a Nats-Msg-Id made of the
// first event id, the stream and its incarnation. Every event id is first
// checked against the stream's id set at that sequence (see idSet).
func (b *Backend) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	return b.appendOne(ctx, req, nil)
}

// appendOne runs one append, whose commit keeps snap when it is not nil.
func (b *Backend) appendOne(ctx context.Context, req varve.AppendRequest, snap *varve.Snapshot) (varve.AppendResult, error) {
	if err := b.ready(ctx); err != nil {
		return varve.AppendResult{}, err
	}
	if req.Category != "" && req.Category != categoryOf(req.Stream, b.sep) {
		return varve.AppendResult{}, fmt.Errorf("nats: category %q of the append is not the stream's at separator %q (the Store's CategorySeparator must be the backend's): %w",
			req.Category, b.sep, varve.ErrInvalidArgument)
	}
	enc := b.token(req.Stream)
	a := &appendOp{b: b, req: req, enc: enc, subj: b.evPrefix + enc, snap: snap}
	res, err := a.run(ctx)
	if len(a.chunks) > 0 && !a.stored && !a.unsure {
		a.dropChunks(ctx)
	}
	return res, b.fail("", err)
}

type appendOp struct {
	b         *Backend
	req       varve.AppendRequest
	enc, subj string
	body      []byte // state header + encoded events (+ the snapshot section)
	snap      *varve.Snapshot
	chunks    []uint64 // sequences of the chunks published for this append
	stored    bool     // this call's commit was stored (and references the chunks)
	unsure    bool     // a publish of the commit got no answer: it may be stored
	idSuffix  string   // set when the original message id is taken by events no longer stored
	// h is the stream's head as the append knows it: cached, read, or
	// guessed empty for a new stream. fresh: h was read from the server
	// during this call; a conflict is reported only on a fresh head. m is
	// h's message when it was read during this call.
	h     head
	m     jsclient.Msg
	fresh bool
	hits  []hit
	// needRead: the head is not cached and the append expects a stream
	// that exists, so decide reads it first. set is the id set at h that
	// decide checked the append against.
	needRead bool
	set      *idSet
}

func (a *appendOp) run(ctx context.Context) (varve.AppendResult, error) {
	a.begin()
	for {
		res, done, err := a.decide(ctx)
		if err != nil || done {
			return res, err
		}
		ack, st, err := a.publish(ctx, a.h)
		switch {
		case jsclient.IsWrongLastSequence(err):
			if err := a.refresh(ctx); err != nil {
				return varve.AppendResult{}, err
			}
		case err != nil:
			return varve.AppendResult{}, err
		case !ack.Duplicate:
			return a.committed(ack.Seq, st), nil
		case ack.Seq > a.h.seq:
			// The server's dedupe window holds a commit with this message
			// id, stored after the head the ids were checked at (a retry of
			// an append whose reply was lost, say): check again.
			if err := a.refresh(ctx); err != nil {
				return varve.AppendResult{}, err
			}
		default:
			// The id set at the head does not hold the first id of the
			// commit that the dedupe window knows: its events were
			// truncated. This is a new append, under a message id of its
			// own.
			a.idSuffix = "~" + strconv.FormatUint(ack.Seq, 10)
		}
	}
}

// begin encodes the events and takes the stream's head: cached, or the
// empty head guessed for a new stream (read again before a conflict is
// reported; a wrong guess costs the publish a retry), or read now.
func (a *appendOp) begin() {
	size := stateLen + eventsSize(a.req.Events)
	if a.snap != nil {
		size += snapshotSectionSize(*a.snap)
	}
	a.body = appendEvents(make([]byte, stateLen, size), a.req.Events)
	if a.snap != nil {
		a.body = appendSnapshotSection(a.body, *a.snap)
	}
	h, cached := a.b.streams.head(a.req.Stream)
	a.h = h
	a.needRead = !cached && a.req.Expected != varve.NoStream
}

// decide checks the append against the stream at a fresh enough head: done
// with the original result when it is a retry, an error when it fails
// (tombstone, expectation, duplicate ids), neither when the commit may be
// published at a.h, whose id set is then a.set.
func (a *appendOp) decide(ctx context.Context) (res varve.AppendResult, done bool, err error) {
	req := a.req
	if a.needRead {
		if err := a.refresh(ctx); err != nil {
			return varve.AppendResult{}, false, err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return varve.AppendResult{}, false, err
		}
		set, err := a.idSet(ctx)
		if err != nil {
			return varve.AppendResult{}, false, err
		}
		if a.h.st.kind == kindTombstone {
			return varve.AppendResult{}, false, varve.ErrStreamDeleted
		}
		hits, ok := set.hits(a.h.seq, req.Events, a.hits[:0])
		if !ok {
			continue // the set moved on: check against its new head
		}
		a.hits = hits
		// As in the memory backend: a stored first id makes the append a
		// retry, whatever it expects; then the expectation; then the other
		// ids.
		if len(hits) > 0 && hits[0].i == 0 {
			res, found, err := a.retry(ctx, hits[0].v)
			if err != nil || found {
				return res, err == nil, err
			}
			hits = hits[1:]
		}
		if !req.Expected.Matches(a.h.version()) {
			if !a.fresh {
				if err := a.refresh(ctx); err != nil {
					return varve.AppendResult{}, false, err
				}
				continue
			}
			return varve.AppendResult{}, false, &varve.WrongExpectedVersionError{Stream: req.Stream, Expected: req.Expected, Actual: a.h.version()}
		}
		for _, x := range hits {
			id := req.Events[x.i].ID
			v, found, err := a.locate(ctx, id, x.v)
			if err != nil {
				return varve.AppendResult{}, false, err
			}
			if found {
				return varve.AppendResult{}, false, fmt.Errorf("%w: event %s is stored at version %d", varve.ErrDuplicateEvent, id, v)
			}
		}
		a.set = set
		return varve.AppendResult{}, false, nil
	}
}

// committed records the commit stored at seq with state st, published at
// a.h with the id set a.set, and returns its result.
func (a *appendOp) committed(seq uint64, st state) varve.AppendResult {
	a.stored = true
	n := len(a.req.Events)
	nh := head{seq: seq, st: st, first: st.version - uint64(n) + 1, n: n}
	a.b.streams.remember(a.req.Stream, nh)
	a.set.appended(a.h.seq, nh, a.req.Events)
	a.b.streams.keepIDs(a.req.Stream, a.set)
	return varve.AppendResult{FirstVersion: nh.first, LastVersion: st.version, Position: nh.lastPos()}
}

// refresh reads the stream's head.
func (a *appendOp) refresh(ctx context.Context) error {
	a.needRead = false
	h, m, err := a.b.fetchHead(ctx, a.req.Stream, a.subj)
	if err != nil {
		return fmt.Errorf("read head: %w", err)
	}
	a.h, a.m, a.fresh = h, m, true
	return nil
}

// idSet returns the stream's id set at a.h, or nil when a.h is a
// tombstone. A cached set at a.h costs nothing; one at a later head moves
// a.h there; one behind a.h is caught up with the commits after its head;
// otherwise the set is built from the stream's commits. A new stream's set
// is empty.
func (a *appendOp) idSet(ctx context.Context) (*idSet, error) {
	b, stream := a.b, a.req.Stream
	for {
		s, cached := b.streams.ids(stream)
		var sh head
		if cached {
			if sh = s.head(); sh.seq >= a.h.seq {
				a.h = sh
				return s, nil
			}
		}
		catchUp := cached && sh.incarnation() == a.h.incarnation()
		switch {
		case !a.h.exists():
			return newIDSet(a.h, len(a.req.Events)), nil
		case a.h.st.kind == kindTombstone:
			return nil, nil
		case a.h.st.kind == kindDeleted:
			return newIDSet(a.h, len(a.req.Events)), nil
		case a.m.Seq != a.h.seq && walks(catchUp, sh, a.h):
			// A walk back starts at the head's message. Reading the head
			// again may also let the cached set follow it for free.
			if err := a.refresh(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if catchUp {
			ids, ok, err := b.idsAfter(ctx, a.subj, sh, a.h, a.m)
			if err != nil {
				if again, err := a.reread(ctx, err); !again {
					return nil, fmt.Errorf("read event ids after %d: %w", sh.seq, err)
				}
				continue
			}
			if ok {
				if s.advance(sh.seq, a.h, ids) {
					b.streams.keepIDs(stream, s)
					return s, nil
				}
				continue
			}
		}
		s, err := b.buildIDs(ctx, stream, a.subj, a.h, a.m)
		if err != nil {
			if again, err := a.reread(ctx, err); !again {
				return nil, fmt.Errorf("read event ids: %w", err)
			}
			continue
		}
		b.streams.keepIDs(stream, s)
		return s, nil
	}
}

// walks reports whether the ids of a stream at h are read by a walk back
// from h: few versions after the cached set's head at sh (catchUp), or few
// live versions. Scans need no message of h.
func walks(catchUp bool, sh, h head) bool {
	if catchUp {
		return h.st.version-sh.st.version < walkMax
	}
	return h.st.version < liveFrom(h)+walkMax
}

// reread decides on an error of reading the stream's ids: a chunk purged
// during the read (by a truncation or delete) calls for reading from the
// new head, if there is one.
func (a *appendOp) reread(ctx context.Context, err error) (bool, error) {
	if !errors.Is(err, errChunkMissing) {
		return false, err
	}
	seq := a.h.seq
	if rerr := a.refresh(ctx); rerr != nil {
		return false, rerr
	}
	return a.h.seq != seq, err
}

func (a *appendOp) msgID(h head) string {
	id := a.req.Events[0].ID
	var buf [32]byte
	hex.Encode(buf[:], id[:])
	return string(buf[:]) + ":" + strconv.FormatUint(h.incarnation(), 10) + ":" + a.enc + a.idSuffix
}

// publish sends the commit at the version after h, expecting h to be the
// subject's last message.
func (a *appendOp) publish(ctx context.Context, h head) (jsclient.Ack, state, error) {
	data, st, exp, err := a.message(ctx, h)
	if err != nil {
		return jsclient.Ack{}, st, err
	}
	ack, err := a.b.c.Publish(ctx, a.subj, data, exp)
	a.b.committed(err)
	var refused *jsclient.APIError
	if err != nil && !errors.As(err, &refused) {
		a.unsure = a.unsure || st.kind == kindChunked
	}
	if err != nil {
		return jsclient.Ack{}, st, fmt.Errorf("publish commit: %w", err)
	}
	return ack, st, nil
}

// message is the commit at the version after h, its state and what its
// publish expects; the events of a commit above the server's max_payload
// are published in chunks first.
func (a *appendOp) message(ctx context.Context, h head) ([]byte, state, jsclient.Expect, error) {
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
	exp := jsclient.Expect{MsgID: a.msgID(h), LastSubjectSeq: h.seq, CheckLast: true}
	data := a.body
	if len(a.body)+len(exp.MsgID)+len(a.subj)+256 <= b.maxPayload {
		putState(a.body, st)
	} else {
		st.kind = kindChunked
		ref, err := a.publishChunks(ctx, h)
		if err != nil {
			return nil, st, exp, err
		}
		data = appendChunkRef(make([]byte, stateLen, stateLen+16+10*len(ref.seqs)), ref)
		putState(data, st)
	}
	return data, st, exp, nil
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
			ack, err := b.c.Publish(ctx, b.chPrefix+a.enc, payload[off:end], jsclient.Expect{})
			if err != nil {
				return chunkRef{}, fmt.Errorf("publish chunk: %w", err)
			}
			a.chunks = append(a.chunks, ack.Seq)
		}
	}
	return chunkRef{events: len(a.req.Events), size: len(payload), seqs: a.chunks}, nil
}

// dropChunks deletes the chunks of a commit that was not stored, unless
// ctx is done: a leftover is invisible, and purged with the stream's next
// delete.
func (a *appendOp) dropChunks(ctx context.Context) {
	for _, seq := range a.chunks {
		if ctx.Err() != nil || a.b.c.Delete(ctx, seq) != nil {
			break
		}
	}
	a.chunks = nil
}

// retry handles an append whose first id the id set holds at version v:
// an exact retry of stored events returns their result, anything else is
// ErrDuplicateEvent. found is false if the id is not stored after all: a
// fingerprint that another id shares, or events removed since the set's
// head (the publish's sequence check then sends the append round again).
func (a *appendOp) retry(ctx context.Context, v varve.Version) (varve.AppendResult, bool, error) {
	req := a.req
	first, n := req.Events[0].ID, len(req.Events)
	stored, err := a.read(ctx, v, n)
	if err != nil || len(stored) == 0 || stored[0].Version != v {
		return varve.AppendResult{}, false, err
	}
	if stored[0].ID != first {
		v, found, err := a.search(ctx, first)
		if err != nil || !found {
			return varve.AppendResult{}, false, err
		}
		if stored, err = a.read(ctx, v, n); err != nil || len(stored) == 0 || stored[0].ID != first {
			return varve.AppendResult{}, false, err
		}
	}
	dup := fmt.Errorf("%w: event %s is stored at version %d", varve.ErrDuplicateEvent, first, stored[0].Version)
	if len(stored) < n {
		return varve.AppendResult{}, true, dup
	}
	for i := range req.Events {
		if stored[i].ID != req.Events[i].ID {
			return varve.AppendResult{}, true, dup
		}
	}
	last := stored[n-1]
	return varve.AppendResult{FirstVersion: stored[0].Version, LastVersion: last.Version, Position: last.Position}, true, nil
}

// locate checks that the event with the given id is stored at version v,
// where the id set has its fingerprint, and searches the stream if another
// id holds it. found is false if the id is not stored, or v no longer is.
func (a *appendOp) locate(ctx context.Context, id uuid.UUID, v varve.Version) (varve.Version, bool, error) {
	stored, err := a.read(ctx, v, 1)
	if err != nil || len(stored) == 0 || stored[0].Version != v {
		return 0, false, err
	}
	if stored[0].ID == id {
		return v, true, nil
	}
	return a.search(ctx, id)
}

// read returns up to n events of the stream from version v on; none if the
// stream is gone.
func (a *appendOp) read(ctx context.Context, v varve.Version, n int) ([]varve.RecordedEvent, error) {
	evs, err := a.b.ReadStream(ctx, varve.StreamQuery{Stream: a.req.Stream, From: v, Limit: n}, nil)
	if errors.Is(err, varve.ErrStreamNotFound) || errors.Is(err, varve.ErrStreamDeleted) {
		return nil, nil
	}
	return evs, err
}

// search reads the whole stream for the event with the given id: the
// answer to two ids with one fingerprint, which is rare enough.
func (a *appendOp) search(ctx context.Context, id uuid.UUID) (varve.Version, bool, error) {
	const page = 1024
	var buf []varve.RecordedEvent
	for from := varve.Version(1); ; {
		evs, err := a.b.ReadStream(ctx, varve.StreamQuery{Stream: a.req.Stream, From: from, Limit: page}, buf[:0])
		if errors.Is(err, varve.ErrStreamNotFound) || errors.Is(err, varve.ErrStreamDeleted) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("search the stream for event %s: %w", id, err)
		}
		for i := range evs {
			if evs[i].ID == id {
				return evs[i].Version, true, nil
			}
		}
		if len(evs) < page {
			return 0, false, nil
		}
		from, buf = evs[len(evs)-1].Version+1, evs
	}
}
