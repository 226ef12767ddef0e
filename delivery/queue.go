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

	older, newer *item     // the list of pending items, in read order
	due          time.Time // of the next attempt, while it waits for a retry
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

// readyFirst orders the items that may start now by read order, so that the
// oldest pending event, which holds the checkpoint back, goes first.
func readyFirst(a, b *item) bool { return a.seq < b.seq }

// dueFirst orders the items that wait for a retry by due time.
func dueFirst(a, b *item) bool { return a.due.Before(b.due) }
