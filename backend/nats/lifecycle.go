package nats

import (
	"context"
	"fmt"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/varve-go/varve"
)

// publishMarker stores a marker with state st on the stream's subject if h
// is still its last message. ok is false when another message came first.
func (b *Backend) publishMarker(ctx context.Context, subj string, h head, st state) (seq uint64, ok bool, err error) {
	m := &natsgo.Msg{Subject: subj, Header: natsgo.Header{}, Data: make([]byte, stateLen)}
	m.Header[hdrExpectLastSub] = []string{strconv.FormatUint(h.seq, 10)}
	st.prev = h.seq
	putState(m.Data, st)
	ack, err := b.publish(ctx, m)
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("publish marker: %w", err)
	case ack.Error == nil:
		return ack.Seq, true, nil
	case ack.Error.ErrCode == errWrongLastSequence:
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("publish marker: %w", ack.Error)
}

// purgeBelow removes the stream's commits and chunks below the given
// sequences.
func (b *Backend) purgeBelow(ctx context.Context, enc string, events, chunks uint64) error {
	if err := b.purge(ctx, b.evPrefix+enc, events); err != nil {
		return err
	}
	return b.purge(ctx, b.chPrefix+enc, chunks)
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
	enc := encodeID(stream)
	subj := b.evPrefix + enc
	for {
		h, m, err := b.fetchHead(ctx, stream, subj)
		if err != nil {
			return fmt.Errorf("nats: truncate %q: %w", stream, err)
		}
		switch {
		case !h.exists():
			return varve.ErrStreamNotFound
		case h.st.kind == kindDeleted || h.st.kind == kindTombstone:
			// Finish a delete that stopped before its purge.
			if err := b.purgeBelow(ctx, enc, h.seq, h.seq); err != nil {
				return fmt.Errorf("nats: truncate %q: %w", stream, err)
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
				err := b.scan(ctx, subj, scanStart{seq: from, end: h.seq}, func(m scanMsg) (bool, error) {
					ch, err := parseHead(m.rawMsg)
					if err != nil {
						return false, err
					}
					if ch.st.isCommit() && ch.st.incarnation == h.incarnation() && ch.st.version >= floor {
						bound.seq, bound.first, bound.chunk = ch.seq, ch.first, firstChunk(m.rawMsg)
						return false, nil
					}
					return m.seq < h.seq, nil
				})
				if err != nil {
					return fmt.Errorf("nats: truncate %q: find the commit of version %d: %w", stream, floor, err)
				}
			}
		}
		markerSeq := h.seq
		if floor > h.st.floor {
			st := h.st
			st.kind, st.floor, st.last, st.prev = kindTruncated, floor, h.lastPos(), h.seq
			seq, ok, err := b.publishMarker(ctx, subj, h, st)
			if err != nil {
				return fmt.Errorf("nats: truncate %q: %w", stream, err)
			}
			if !ok {
				continue
			}
			markerSeq = seq
			b.remember(stream, head{seq: seq, st: st})
			b.follow(stream, head{seq: seq, st: st}, rawMsg{})
		}
		if bound.seq != 0 && bound.first < floor {
			if err := b.addFloor(ctx, bound.seq, floor); err != nil {
				return fmt.Errorf("nats: truncate %q: %w", stream, err)
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
			return fmt.Errorf("nats: truncate %q: %w", stream, err)
		}
		return nil
	}
}

func firstChunk(m rawMsg) uint64 {
	if len(m.data) < stateLen || m.data[1] != kindChunked {
		return 0
	}
	ref, err := getChunkRef(m.data[stateLen:])
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
	enc := encodeID(stream)
	subj := b.evPrefix + enc
	for {
		h, _, err := b.fetchHead(ctx, stream, subj)
		if err != nil {
			return fmt.Errorf("nats: delete %q: %w", stream, err)
		}
		switch {
		case h.st.kind == kindTombstone:
			return varve.ErrStreamDeleted
		case !h.exists() && !tombstone:
			return varve.ErrStreamNotFound
		case h.st.kind == kindDeleted && !tombstone:
			if err := b.purgeBelow(ctx, enc, h.seq, h.seq); err != nil {
				return fmt.Errorf("nats: delete %q: %w", stream, err)
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
		seq, ok, err := b.publishMarker(ctx, subj, h, st)
		if err != nil {
			return fmt.Errorf("nats: delete %q: %w", stream, err)
		}
		if !ok {
			continue
		}
		b.remember(stream, head{seq: seq, st: st})
		b.follow(stream, head{seq: seq, st: st}, rawMsg{})
		if err := b.purgeBelow(ctx, enc, seq, seq); err != nil {
			return fmt.Errorf("nats: delete %q: %w", stream, err)
		}
		if err := b.deleteSnapshot(ctx, stream); err != nil {
			return fmt.Errorf("nats: delete %q: %w", stream, err)
		}
		return nil
	}
}

// addFloor records that the commit at seq shows only versions >= floor.
func (b *Backend) addFloor(ctx context.Context, seq uint64, floor varve.Version) error {
	ack, err := b.publish(ctx, &natsgo.Msg{Subject: b.floorSubj, Data: appendFloor(nil, seq, floor)})
	if err == nil && ack.Error != nil {
		err = ack.Error
	}
	if err != nil {
		return fmt.Errorf("record floor of commit %d: %w", seq, err)
	}
	b.floorsMu.Lock()
	b.floors[seq] = max(b.floors[seq], floor)
	b.floorsMu.Unlock()
	return nil
}

// refreshFloors reads the floor entries written since the last refresh:
// one direct get when there are none.
func (b *Backend) refreshFloors(ctx context.Context) error {
	b.floorsMu.Lock()
	from := b.floorsSeq
	b.floorsMu.Unlock()
	for {
		m, found, err := b.getNext(ctx, from+1, b.floorSubj)
		if err != nil {
			return fmt.Errorf("read floor entries: %w", err)
		}
		if !found {
			return nil
		}
		seq, floor, err := getFloor(m.data)
		if err != nil {
			return fmt.Errorf("floor entry %d: %w", m.seq, err)
		}
		b.floorsMu.Lock()
		b.floors[seq] = max(b.floors[seq], floor)
		b.floorsSeq = max(b.floorsSeq, m.seq)
		b.floorsMu.Unlock()
		from = m.seq
	}
}

func (b *Backend) floorOf(seq uint64) varve.Version {
	b.floorsMu.Lock()
	defer b.floorsMu.Unlock()
	return b.floors[seq]
}
