package nats

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// An idSet holds the ids of a stream's live events (its current
// incarnation, versions from the floor on) as of one head of its subject,
// so that an append checks every id it carries without a request. The ids
// are kept as 64-bit fingerprints mapped to the newest version holding one,
// as the memory backend does; a hit is verified against the stored event,
// since two ids may share a fingerprint.
//
// A set is exact for its head, and an append checked against it is
// published with that head as the expected last sequence: a commit the set
// does not know (another process's, or one that a concurrent read missed)
// makes the publish fail, and the append catches the set up and checks
// again. Sets live in the stream cache, which weighs them by the ids they
// hold; an evicted set is rebuilt from the stream when it is needed again.
type idSet struct {
	mu  sync.Mutex
	h   head
	ids map[uint64]varve.Version
}

// idAt is an event id's fingerprint and the version of the event.
type idAt struct {
	fp uint64
	v  varve.Version
}

// hit is an event of an append whose id's fingerprint a set holds.
type hit struct {
	i int           // index of the event in the append
	v varve.Version // version of the stored event with that fingerprint
}

// fingerprint folds an event id into a set's key.
func fingerprint(id uuid.UUID) uint64 {
	return binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:])
}

func newIDSet(h head, n int) *idSet {
	return &idSet{h: h, ids: make(map[uint64]varve.Version, n)}
}

// liveFrom is the first version of h's stream that is not truncated.
func liveFrom(h head) varve.Version { return max(h.st.floor, 1) }

func (s *idSet) head() head {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

// hits appends to out the events of evs whose id fingerprints the set holds
// at a live version. ok is false when the set is no longer at the head with
// sequence seq.
func (s *idSet) hits(seq uint64, evs []varve.Event, out []hit) ([]hit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h.seq != seq {
		return out, false
	}
	if len(s.ids) == 0 {
		return out, true
	}
	floor := liveFrom(s.h)
	for i := range evs {
		if v, ok := s.ids[fingerprint(evs[i].ID)]; ok && v >= floor {
			out = append(out, hit{i: i, v: v})
		}
	}
	return out, true
}

// advance moves the set from the head with sequence from to h, adding ids
// (in version order). It does nothing and returns false if the set is no
// longer at from.
func (s *idSet) advance(from uint64, h head, ids []idAt) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h.seq != from {
		return false
	}
	s.applyLocked(h, ids)
	return true
}

// appended moves the set from the head with sequence from to h, the commit
// of evs that was published after it.
func (s *idSet) appended(from uint64, h head, evs []varve.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h.seq != from {
		return // the set has moved past the commit, or elsewhere: it holds what it holds
	}
	for i := range evs {
		s.ids[fingerprint(evs[i].ID)] = h.first + varve.Version(i)
	}
	s.h = h
}

func (s *idSet) applyLocked(h head, ids []idAt) {
	rose := liveFrom(h) > liveFrom(s.h)
	s.h = h
	for _, x := range ids {
		s.ids[x.fp] = x.v
	}
	if rose {
		floor := liveFrom(h)
		for fp, v := range s.ids {
			if v < floor {
				delete(s.ids, fp)
			}
		}
	}
}

// resetLocked empties the set at h, a delete marker.
func (s *idSet) resetLocked(h head) {
	s.h, s.ids = h, make(map[uint64]varve.Version)
}

// idsOf appends the fingerprints and versions of the events of a commit's
// payload that have versions >= floor.
func idsOf(out []idAt, payload []byte, st state, floor varve.Version) ([]idAt, error) {
	r, err := newEventReader(payload)
	if err != nil {
		return out, err
	}
	if uint64(r.n) > st.version {
		return out, fmt.Errorf("%w: bad event count", errCorrupt)
	}
	first := st.version - uint64(r.n) + 1
	var e varve.RecordedEvent
	for i := 0; r.n > 0; i++ {
		if err := r.next(&e, true); err != nil {
			return out, err
		}
		if v := first + uint64(i); v >= floor {
			out = append(out, idAt{fp: fingerprint(e.ID), v: v})
		}
	}
	return out, nil
}

// follow moves the stream's cached id set to h, a head just read or
// written, where that takes no request: h comes right after the set's head
// (an inline commit, whose message m holds its ids, or a truncation marker),
// or h is a delete marker, which empties the stream. Otherwise the set
// stays where it is, and the next append catches it up.
func (b *Backend) follow(stream string, h head, m jsclient.Msg) {
	s, ok := b.streams.ids(stream)
	if !ok || !h.exists() {
		return
	}
	if h.st.kind == kindTombstone {
		b.streams.dropIDs(stream)
		return
	}
	s.mu.Lock()
	switch {
	case s.h.seq >= h.seq:
	case h.st.kind == kindDeleted:
		s.resetLocked(h)
	case h.st.prev != s.h.seq || h.st.incarnation != s.h.incarnation():
	case h.st.kind == kindTruncated:
		s.applyLocked(h, nil)
	case h.st.kind == kindCommit && m.Seq == h.seq && len(m.Data) > stateLen:
		if ids, err := idsOf(nil, m.Data[stateLen:], h.st, liveFrom(h)); err == nil {
			s.applyLocked(h, ids)
		}
	}
	s.mu.Unlock()
	b.streams.keepIDs(stream, s)
}

// offerIDs makes a set of the events of a read that returned the whole
// live stream at head h, if no set at h or later is cached.
func (b *Backend) offerIDs(stream string, h head, evs []varve.RecordedEvent) {
	if len(evs) >= b.cfg.CachedEventIDs {
		return
	}
	if s, ok := b.streams.ids(stream); ok && s.head().seq >= h.seq {
		return
	}
	s := newIDSet(h, len(evs))
	for i := range evs {
		s.ids[fingerprint(evs[i].ID)] = evs[i].Version
	}
	b.streams.keepIDs(stream, s)
}

// chainBack collects messages of a subject from m (whose head is h) back
// along their prev sequences, newest first. take says of each message
// whether to keep it and whether to go on to its predecessor. ok is false
// when the chain breaks (a message purged meanwhile) or runs past maxHops.
func (b *Backend) chainBack(ctx context.Context, subj string, m jsclient.Msg, h head, maxHops int, take func(head) (keep, more bool)) (chain []jsclient.Msg, ok bool, err error) {
	cur, ch := m, h
	for hops := 0; ; hops++ {
		keep, more := take(ch)
		if keep {
			chain = append(chain, cur)
		}
		if !more {
			return chain, true, nil
		}
		if ch.st.prev == 0 || hops >= maxHops {
			return nil, false, nil
		}
		nm, found, err := b.c.Get(ctx, ch.st.prev)
		if err != nil {
			return nil, false, err
		}
		if !found || nm.Subject != subj {
			return nil, false, nil
		}
		if ch, err = parseHead(nm); err != nil {
			return nil, false, err
		}
		cur = nm
	}
}

// idsAfter returns the ids of the commits between from and h, two heads of
// one incarnation, with versions >= h's floor: a walk back from h for a few
// versions if m is h's message, a scan of the subject otherwise. ok is false
// if the messages do not connect the two heads; the set is then rebuilt.
func (b *Backend) idsAfter(ctx context.Context, subj string, from, h head, m jsclient.Msg) (ids []idAt, ok bool, err error) {
	inc, floor := h.incarnation(), liveFrom(h)
	add := func(msg jsclient.Msg) (bool, error) {
		st, err := getState(msg.Data)
		if err != nil {
			return false, fmt.Errorf("message %d: %w", msg.Seq, err)
		}
		switch {
		case st.kind == kindTruncated:
			return true, nil
		case !st.isCommit() || st.incarnation != inc:
			return false, nil
		}
		p, err := b.payload(ctx, msg, st)
		if err == nil {
			ids, err = idsOf(ids, p, st, floor)
		}
		return err == nil, err
	}
	if m.Seq == h.seq && h.st.version-from.st.version < walkMax {
		broken := false
		chain, ok, err := b.chainBack(ctx, subj, m, h, 2*walkMax, func(ch head) (bool, bool) {
			if ch.seq <= from.seq {
				broken = ch.seq < from.seq
				return false, false
			}
			return true, true
		})
		if err != nil {
			return nil, false, err
		}
		if ok && !broken {
			for i := len(chain) - 1; i >= 0; i-- {
				if ok, err := add(chain[i]); err != nil || !ok {
					return nil, false, err
				}
			}
			return ids, true, nil
		}
	}
	ok = true
	err = b.c.Scan(ctx, subj, from.seq+1, h.seq, int(min(h.st.version-from.st.version+2, jsclient.MaxBatch)), func(msg jsclient.Msg) (bool, error) {
		if msg.Seq > h.seq {
			return false, nil
		}
		var err error
		if ok, err = add(msg); err != nil || !ok {
			return false, err
		}
		return msg.Seq < h.seq, nil
	})
	if err != nil || !ok {
		return nil, false, err
	}
	return ids, true, nil
}

// buildIDs makes the id set of the stream at h, a head of a live
// incarnation, from the incarnation's commits: a walk back from the head
// when the live versions are few and m is h's message, a scan of the
// subject (from a remembered commit, if any) otherwise.
func (b *Backend) buildIDs(ctx context.Context, stream, subj string, h head, m jsclient.Msg) (*idSet, error) {
	inc, floor := h.incarnation(), liveFrom(h)
	if h.st.version < floor {
		return newIDSet(h, 0), nil // everything is truncated
	}
	live := h.st.version - floor + 1
	s := newIDSet(h, int(min(live, uint64(b.cfg.CachedEventIDs))))
	var ids []idAt
	add := func(msg jsclient.Msg, st state) error {
		p, err := b.payload(ctx, msg, st)
		if err == nil {
			ids, err = idsOf(ids[:0], p, st, floor)
		}
		for _, x := range ids {
			s.ids[x.fp] = x.v
		}
		return err
	}
	if m.Seq == h.seq && live < walkMax {
		chain, ok, err := b.chainBack(ctx, subj, m, h, 2*walkMax, func(ch head) (bool, bool) {
			switch {
			case ch.st.kind == kindTruncated:
				return false, true
			case !ch.st.isCommit() || ch.st.incarnation != inc:
				return false, false
			}
			return true, ch.first > floor
		})
		if err != nil {
			return nil, err
		}
		// A chain that ends anywhere but at a commit holding the floor
		// missed commits: scan instead.
		if ok && len(chain) > 0 {
			if last, _ := parseHead(chain[len(chain)-1]); last.first <= floor {
				for i := len(chain) - 1; i >= 0; i-- {
					st, _ := getState(chain[i].Data)
					if err := add(chain[i], st); err != nil {
						return nil, err
					}
				}
				return s, nil
			}
		}
	}
	from, ok := b.hintFor(stream, inc, floor)
	if !ok {
		from = inc + 1
	}
	err := b.c.Scan(ctx, subj, from, h.seq, int(min(live+1, jsclient.MaxBatch)), func(msg jsclient.Msg) (bool, error) {
		if msg.Seq > h.seq {
			return false, nil
		}
		st, err := getState(msg.Data)
		if err != nil {
			return false, fmt.Errorf("message %d: %w", msg.Seq, err)
		}
		if st.isCommit() && st.incarnation == inc && st.version >= floor {
			if err := add(msg, st); err != nil {
				return false, err
			}
		}
		return msg.Seq < h.seq, nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
