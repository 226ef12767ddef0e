package nats

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/maypok86/otter/v2"

	"github.com/varve-go/varve"
)

// streamCache holds what the backend knows of the streams it met: the
// head last seen (so that an append is one publish), a commit to start
// scans at, and the ids of the live events as of one head (so that an
// append checks its ids without a request). One cache bounded by weight
// holds all of it: a stream weighs 1 plus the ids it holds, and the bound
// is Config.CachedStreams + Config.CachedEventIDs. An evicted stream costs
// its next append a read of the head and of the ids.
type streamCache struct {
	c *otter.Cache[string, *streamState]
}

// streamState is the cached state of one stream.
type streamState struct {
	mu      sync.Mutex
	head    head
	hasHead bool
	hint    hint
	hasHint bool
	ids     *idSet
	// weight is what the cache charged for the entry when it last stored
	// it.
	weight atomic.Uint32
}

func newStreamCache(streams, ids int) (*streamCache, error) {
	c, err := otter.New(&otter.Options[string, *streamState]{
		MaximumWeight: uint64(streams) + uint64(ids),
		Weigher:       func(_ string, s *streamState) uint32 { return s.weight.Load() },
		// Maintenance runs on the calling goroutine: the backend starts no
		// goroutines of its own.
		Executor: func(fn func()) { fn() },
	})
	if err != nil {
		return nil, err
	}
	return &streamCache{c: c}, nil
}

func (sc *streamCache) get(stream string) (*streamState, bool) {
	return sc.c.GetIfPresent(stream)
}

// entry returns the stream's state, adding an empty one if there is none.
func (sc *streamCache) entry(stream string) *streamState {
	if s, ok := sc.c.GetIfPresent(stream); ok {
		return s
	}
	s := &streamState{}
	s.weight.Store(1)
	s, _ = sc.c.SetIfAbsent(stream, s)
	return s
}

// forget drops everything known of the stream.
func (sc *streamCache) forget(stream string) { sc.c.Invalidate(stream) }

// head returns the stream's cached head.
func (sc *streamCache) head(stream string) (head, bool) {
	s, ok := sc.get(stream)
	if !ok {
		return head{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head, s.hasHead
}

// remember caches h as the stream's head unless a later one is cached.
func (sc *streamCache) remember(stream string, h head) {
	s := sc.entry(stream)
	s.mu.Lock()
	if !s.hasHead || s.head.seq <= h.seq {
		s.head, s.hasHead = h, true
	}
	s.mu.Unlock()
}

// rememberHint caches a commit of the stream to start scans at.
func (sc *streamCache) rememberHint(stream string, h hint) {
	s := sc.entry(stream)
	s.mu.Lock()
	s.hint, s.hasHint = h, true
	s.mu.Unlock()
}

// hintAt returns the stream's remembered commit if a scan for version lo
// of the incarnation can start there.
func (sc *streamCache) hintAt(stream string, incarnation uint64, lo varve.Version) (hint, bool) {
	s, ok := sc.get(stream)
	if !ok {
		return hint{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hasHint && s.hint.incarnation == incarnation && s.hint.first <= lo {
		return s.hint, true
	}
	return hint{}, false
}

// ids returns the stream's cached id set.
func (sc *streamCache) ids(stream string) (*idSet, bool) {
	s, ok := sc.get(stream)
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids, s.ids != nil
}

// keepIDs caches set as the stream's id set, unless a set at a later head
// is cached, and has the cache weigh the stream again when the set's size
// moved by more than an eighth since the cache last did.
func (sc *streamCache) keepIDs(stream string, set *idSet) {
	set.mu.Lock()
	n, seq := len(set.ids), set.h.seq
	set.mu.Unlock()
	s := sc.entry(stream)
	s.mu.Lock()
	if s.ids != nil && s.ids != set && s.ids.head().seq >= seq {
		s.mu.Unlock()
		return
	}
	s.ids = set
	s.mu.Unlock()
	w := int(s.weight.Load()) - 1
	if n <= w+w/8+8 && n >= w/2 {
		return
	}
	s.weight.Store(uint32(min(n+1, math.MaxUint32)))
	sc.c.Set(stream, s)
}

// dropIDs forgets the stream's id set (a tombstone: no append will need
// it).
func (sc *streamCache) dropIDs(stream string) {
	s, ok := sc.get(stream)
	if !ok {
		return
	}
	s.mu.Lock()
	s.ids = nil
	s.mu.Unlock()
	if s.weight.Load() > 1 {
		s.weight.Store(1)
		sc.c.Set(stream, s)
	}
}
