package workflow

import (
	"container/heap"
	"time"

	"github.com/varve-go/varve"
)

// timerOverhead approximates the bytes one index entry holds besides its
// stream and id strings: the entry, its two heap slots and its map entry
// (100,000 entries of a 42-byte stream and a 7-byte id took 241 bytes each
// of heap, go1.26 amd64).
const timerOverhead = 192

// timerKey orders timers by due time, then stream, then id.
type timerKey struct {
	due        time.Time
	stream, id string
}

func (a timerKey) less(b timerKey) bool {
	if c := a.due.Compare(b.due); c != 0 {
		return c < 0
	}
	if a.stream != b.stream {
		return a.stream < b.stream
	}
	return a.id < b.id
}

type timerEntry struct {
	timerKey
	after        varve.Position // where a read of $all finds its record again
	minAt, maxAt int
}

func (e *timerEntry) bytes() int64 { return timerOverhead + int64(len(e.stream)+len(e.id)) }

type timerName struct{ stream, id string }

// timerIndex holds the pending timers below limit, at most count of them and
// bytes in all: inserting past either budget evicts the latest-due entry and
// lowers limit to it, so the index always holds exactly the pending timers
// it has read that sort below limit, and knows nothing of those at or above
// it; unbounded means limit is +infinity: the index holds every timer read.
// from is the earliest position after which a read of $all finds the
// records of every timer the index let go.
type timerIndex struct {
	maxCount int
	maxBytes int64

	byName    map[timerName]*timerEntry
	min       minHeap
	max       maxHeap
	bytes     int64
	limit     timerKey
	unbounded bool
	from      varve.Position
}

func newTimerIndex(count int, bytes int64) *timerIndex {
	return &timerIndex{maxCount: count, maxBytes: bytes, byName: map[timerName]*timerEntry{}, unbounded: true}
}

// schedule records the latest schedule of a timer, read after position
// after: it replaces an earlier one, and is kept if it sorts below limit
// and, when floor is set, not below floor.
func (x *timerIndex) schedule(k timerKey, after varve.Position, floor *timerKey) {
	x.remove(timerName{k.stream, k.id})
	if floor != nil && k.less(*floor) {
		return
	}
	if !x.unbounded && !k.less(x.limit) {
		x.letGo(after)
		return
	}
	e := &timerEntry{timerKey: k, after: after}
	x.byName[timerName{k.stream, k.id}] = e
	heap.Push(&x.min, e)
	heap.Push(&x.max, e)
	x.bytes += e.bytes()
	for len(x.min) > max(x.maxCount, 1) || (x.bytes > x.maxBytes && len(x.min) > 1) {
		last := x.max[0]
		x.remove(timerName{last.stream, last.id})
		x.letGo(last.after)
		x.limit = last.timerKey
	}
}

func (x *timerIndex) letGo(after varve.Position) {
	if x.unbounded || after.Less(x.from) {
		x.from = after
	}
	x.unbounded = false
}

func (x *timerIndex) remove(n timerName) {
	e, ok := x.byName[n]
	if !ok {
		return
	}
	delete(x.byName, n)
	heap.Remove(&x.min, e.minAt)
	heap.Remove(&x.max, e.maxAt)
	x.bytes -= e.bytes()
}

// firstEntry returns the earliest-due timer, nil if none.
func (x *timerIndex) firstEntry() *timerEntry {
	if len(x.min) == 0 {
		return nil
	}
	return x.min[0]
}

// reset forgets every timer and the limit.
func (x *timerIndex) reset() {
	clear(x.byName)
	x.min, x.max, x.bytes = x.min[:0], x.max[:0], 0
	x.limit, x.unbounded, x.from = timerKey{}, true, varve.Start
}

func (x *timerIndex) len() int { return len(x.min) }

type minHeap []*timerEntry

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i].less(h[j].timerKey) }
func (h minHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].minAt, h[j].minAt = i, j
}
func (h *minHeap) Push(v any) { e := v.(*timerEntry); e.minAt = len(*h); *h = append(*h, e) }
func (h *minHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

type maxHeap []*timerEntry

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[j].less(h[i].timerKey) }
func (h maxHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].maxAt, h[j].maxAt = i, j
}
func (h *maxHeap) Push(v any) { e := v.(*timerEntry); e.maxAt = len(*h); *h = append(*h, e) }
func (h *maxHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
