package nats

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// publishMarker stores a marker with state st on the stream's subject if h
// is still its last message. ok is false when another message came first.
func (b *Backend) publishMarker(ctx context.Context, subj string, h head, st state, body []byte) (seq uint64, ok bool, err error) {
	data := append(make([]byte, stateLen, stateLen+len(body)), body...)
	st.prev = h.seq
	putState(data, st)
	ack, err := b.c.Publish(ctx, subj, data, jsclient.Expect{LastSubjectSeq: h.seq, CheckLast: true})
	b.committed(err)
	switch {
	case err == nil:
		return ack.Seq, true, nil
	case jsclient.IsWrongLastSequence(err):
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("publish marker: %w", err)
}

// purgeBelow removes the stream's commits and chunks below the given
// sequences.
func (b *Backend) purgeBelow(ctx context.Context, enc string, events, chunks uint64) error {
	if err := b.c.Purge(ctx, b.evPrefix+enc, events); err != nil {
		return fmt.Errorf("purge events below %d: %w", events, err)
	}
	if err := b.c.Purge(ctx, b.chPrefix+enc, chunks); err != nil {
		return fmt.Errorf("purge chunks below %d: %w", chunks, err)
	}
	return nil
}

// Truncate implements varve.Backend. Whole commits below the new floor are
// purged from the subject. A commit that the floor cuts stays stored: the
// floor is recorded in a marker on the stream's subject (for stream reads)
// and in a floor entry (for $all reads), and readers hide its events below
// the floor.
func (b *Backend) Truncate(ctx context.Context, stream string, before varve.Version) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	enc := b.token(stream)
	subj := b.evPrefix + enc
	for {
		h, m, err := b.fetchHead(ctx, stream, subj)
		if err != nil {
			return b.fail("", err)
		}
		switch {
		case !h.exists():
			return varve.ErrStreamNotFound
		case h.st.kind == kindDeleted || h.st.kind == kindTombstone:
			// Finish a delete that stopped before its purge.
			if err := b.purgeBelow(ctx, enc, h.seq, h.seq); err != nil {
				return b.fail("", err)
			}
			if h.st.kind == kindTombstone {
				return varve.ErrStreamDeleted
			}
			return varve.ErrStreamNotFound
		}
		ver := h.st.version
		floor := max(min(before, ver+1), h.st.floor)
		if floor <= 1 {
			return nil
		}
		// The boundary is the commit that holds version floor, if any.
		var bound struct {
			seq, chunk uint64
			first      varve.Version
		}
		if floor <= ver {
			if h.st.isCommit() && h.first <= floor {
				bound.seq, bound.first, bound.chunk = h.seq, h.first, firstChunk(m)
			} else {
				from, ok := b.hintFor(stream, h.incarnation(), floor)
				if !ok {
					from = h.incarnation() + 1
				}
				err := b.c.Scan(ctx, subj, from, h.seq, 0, func(m jsclient.Msg) (bool, error) {
					ch, err := parseHead(m)
					if err != nil {
						return false, err
					}
					if ch.st.isCommit() && ch.st.incarnation == h.incarnation() && ch.st.version >= floor {
						bound.seq, bound.first, bound.chunk = ch.seq, ch.first, firstChunk(m)
						return false, nil
					}
					return m.Seq < h.seq, nil
				})
				if err != nil {
					return b.fail(fmt.Sprintf("find the commit of version %d", floor), err)
				}
			}
		}
		markerSeq := h.seq
		if floor > h.st.floor {
			st := h.st
			st.kind, st.floor, st.last, st.prev = kindTruncated, floor, h.lastPos(), h.seq
			body, err := b.carriedSnapshot(ctx, h, m)
			if errors.Is(err, errCorrupt) {
				// A chunk purged under us by a truncation or delete that
				// moved the head (read it again), or a head that cannot be
				// read whole: truncate without carrying a snapshot on.
				nh, _, ferr := b.fetchHead(ctx, stream, subj)
				if ferr != nil {
					return b.fail("", ferr)
				}
				if nh.seq != h.seq {
					continue
				}
				body, err = nil, nil
			}
			if err != nil {
				return b.fail("", err)
			}
			seq, ok, err := b.publishMarker(ctx, subj, h, st, body)
			if err != nil {
				return b.fail("", err)
			}
			if !ok {
				continue
			}
			markerSeq = seq
			b.streams.remember(stream, head{seq: seq, st: st})
			b.follow(stream, head{seq: seq, st: st}, jsclient.Msg{})
		}
		if bound.seq != 0 && bound.first < floor {
			if err := b.addFloor(ctx, bound.seq, floor); err != nil {
				return b.fail("", err)
			}
		}
		evBefore, chBefore := markerSeq, markerSeq
		if bound.seq != 0 {
			evBefore, chBefore = bound.seq, bound.seq
			if bound.chunk != 0 {
				chBefore = bound.chunk
			}
		}
		if err := b.purgeBelow(ctx, enc, evBefore, chBefore); err != nil {
			return b.fail("", err)
		}
		return nil
	}
}

// carriedSnapshot is the body of a truncation marker published over the
// head h (message m): no events and the snapshot section that h keeps, so
// that the snapshot kept with the stream's last commit stays the stream's
// when the truncation purges that commit. Nil when h keeps none.
func (b *Backend) carriedSnapshot(ctx context.Context, h head, m jsclient.Msg) ([]byte, error) {
	payload, err := b.headBody(ctx, h, m)
	if err != nil || payload == nil {
		return nil, err
	}
	sec, err := snapshotSection(payload)
	if err != nil || sec == nil || stateLen+1+len(sec)+512 > b.maxPayload {
		return nil, err // a snapshot above max_payload is not carried on
	}
	return append(binary.AppendUvarint(nil, 0), sec...), nil
}

func firstChunk(m jsclient.Msg) uint64 {
	if len(m.Data) < stateLen || m.Data[1] != kindChunked {
		return 0
	}
	ref, err := getChunkRef(m.Data[stateLen:])
	if err != nil || len(ref.seqs) == 0 {
		return 0
	}
	return ref.seqs[0]
}

// Delete implements varve.Backend: a delete (or tombstone) marker is
// published with the stream's last sequence as the expected one, which makes
// the check of expected and the delete one atomic step; then everything
// before the marker is purged. The marker starts a new incarnation: the
// next append gets version 1.
func (b *Backend) Delete(ctx context.Context, stream string, expected varve.ExpectedVersion, tombstone bool) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	enc := b.token(stream)
	subj := b.evPrefix + enc
	for {
		h, _, err := b.fetchHead(ctx, stream, subj)
		if err != nil {
			return b.fail("", err)
		}
		switch {
		case h.st.kind == kindTombstone:
			return varve.ErrStreamDeleted
		case !h.exists() && !tombstone:
			return varve.ErrStreamNotFound
		case h.st.kind == kindDeleted && !tombstone:
			if err := b.purgeBelow(ctx, enc, h.seq, h.seq); err != nil {
				return b.fail("", err)
			}
			return varve.ErrStreamNotFound
		}
		if !expected.Matches(h.version()) {
			return &varve.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: h.version()}
		}
		st := state{kind: kindDeleted, created: h.st.created, updated: time.Now().UnixNano(), prev: h.seq}
		if tombstone {
			st.kind = kindTombstone
		}
		seq, ok, err := b.publishMarker(ctx, subj, h, st, nil)
		if err != nil {
			return b.fail("", err)
		}
		if !ok {
			continue
		}
		b.streams.remember(stream, head{seq: seq, st: st})
		b.follow(stream, head{seq: seq, st: st}, jsclient.Msg{})
		if err := b.purgeBelow(ctx, enc, seq, seq); err != nil {
			return b.fail("", err)
		}
		if err := b.deleteSnapshot(ctx, stream); err != nil {
			return b.fail("", err)
		}
		return nil
	}
}

// floorTable holds the floor entries: the first visible version of each
// commit that a truncation cut.
type floorTable struct {
	mu     sync.Mutex
	floors map[uint64]varve.Version // commit seq -> first visible version
	last   uint64                   // sequence of the last floor entry read
}

func (t *floorTable) add(seq uint64, floor varve.Version) {
	t.mu.Lock()
	t.floors[seq] = max(t.floors[seq], floor)
	t.mu.Unlock()
}

func (t *floorTable) of(seq uint64) varve.Version {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.floors[seq]
}

// addFloor records that the commit at seq shows only versions >= floor.
func (b *Backend) addFloor(ctx context.Context, seq uint64, floor varve.Version) error {
	if _, err := b.c.Publish(ctx, b.floorSubj, appendFloor(nil, seq, floor), jsclient.Expect{}); err != nil {
		return fmt.Errorf("record floor of commit %d: %w", seq, err)
	}
	b.floors.add(seq, floor)
	return nil
}

// refreshFloors reads the floor entries written since the last refresh:
// one direct get when there are none.
func (b *Backend) refreshFloors(ctx context.Context) error {
	b.floors.mu.Lock()
	from := b.floors.last
	b.floors.mu.Unlock()
	for {
		m, found, err := b.c.GetNext(ctx, from+1, b.floorSubj)
		if err != nil || !found {
			return err
		}
		seq, floor, err := getFloor(m.Data)
		if err != nil {
			return fmt.Errorf("floor entry %d: %w", m.Seq, err)
		}
		b.floors.add(seq, floor)
		b.floors.mu.Lock()
		b.floors.last = max(b.floors.last, m.Seq)
		b.floors.mu.Unlock()
		from = m.Seq
	}
}
