package delivery

import (
	"time"

	"github.com/varve-go/varve"
)

// item is one event between being read and being delivered or parked. It is
// owned by the coordinator, except while a worker runs its attempt.
type item struct {
	ev   varve.RecordedEvent
	seq  uint64         // read order
	prev varve.Position // position of whatever was read just before ev

	q        *streamQueue // per-stream mode
	attempts int
	first    time.Time // start of the first attempt
	lastErr  error

	park   bool // the job is to park the event, not to deliver it
	record ParkedEvent

	older, newer *item // the list of pending items, in read order
	readyIdx     int   // index in the ready heap, -1 when not in it
	due          time.Time
	retryIdx     int
}

// streamQueue holds the pending events of one stream in per-stream mode:
// at most one of them (current) is ready, in flight or waiting to retry.
type streamQueue struct {
	name    string
	current *item
	pending []*item
	// blocked: an event of the stream is parked, so later ones are parked
	// too, until the parked ones are replayed or skipped.
	blocked       bool
	parkedVersion varve.Version // version of the parked stream after our last park
}

// readyHeap orders the items that may start now by read order, so that the
// oldest pending event, which holds the checkpoint back, goes first.
type readyHeap []*item

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].seq < h[j].seq }
func (h readyHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].readyIdx, h[j].readyIdx = i, j
}
func (h *readyHeap) Push(x any) {
	it := x.(*item)
	it.readyIdx = len(*h)
	*h = append(*h, it)
}
func (h *readyHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.readyIdx = -1
	return it
}

// retryHeap orders the items that wait for a retry by due time.
type retryHeap []*item

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h retryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].retryIdx, h[j].retryIdx = i, j
}
func (h *retryHeap) Push(x any) {
	it := x.(*item)
	it.retryIdx = len(*h)
	*h = append(*h, it)
}
func (h *retryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.retryIdx = -1
	return it
}
