package delivery

import (
	"context"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// Source is what a [Dispatcher] reads: an ordered feed of events and the
// place its checkpoint goes. A [*subscription.Subscription] is one; package
// github.com/varve-go/varve/cdc/pgcdc has one over a PostgreSQL replication
// slot.
//
// The dispatcher calls Name and Position before Run, then Next from one
// goroutine and SaveCheckpoint from another (never two saves at once). The
// events of successive batches must have increasing positions, and events
// of one Stream (the ordering key) must come in the order they are to be
// delivered. SaveCheckpoint(pos) says that every event at or before pos
// was delivered or parked: the source may forget them, and must resume
// after pos at the latest when it is opened again.
type Source interface {
	// Name names the feed: it is the Subscription of each [Delivery], the
	// first part of the idempotency key ([Key]) and the name of the default
	// parked stream.
	Name() string
	// Position is where the source resumes: the position before its first
	// event.
	Position() varve.Position
	// Next returns the next batch of events, waiting for one; a batch may
	// be empty and only move Through on. It returns ctx's error when ctx
	// ends, and an error wrapping varve.ErrClosed when the source cannot
	// be read any more (the dispatcher then stops).
	Next(ctx context.Context) (subscription.Batch, error)
	// SaveCheckpoint records that everything up to pos is done with.
	SaveCheckpoint(ctx context.Context, pos varve.Position) error
}

// storeSource is a Source whose events are kept in a varve store, which then
// holds the default parked store and the events that parked records refer
// to.
type storeSource interface {
	Store() *varve.Store
}

var _ storeSource = (*subscription.Subscription)(nil)

// sourceStore returns the store that keeps src's events, or nil.
func sourceStore(src Source) *varve.Store {
	if s, ok := src.(storeSource); ok {
		return s.Store()
	}
	return nil
}
