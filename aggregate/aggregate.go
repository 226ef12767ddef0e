package aggregate

import (
	"errors"
	"fmt"

	"github.com/varve-go/varve"
)

// ErrDiscarded: the aggregate's save failed, its pending events were thrown
// away, and it can no longer be changed or saved. Load it again.
var ErrDiscarded = errors.New("aggregate: discarded after a failed save; load it again")

// Aggregate is one loaded aggregate: its state as of a stored version plus
// the events raised since, not yet saved. It belongs to the goroutine that
// loaded it and is not safe for concurrent use.
type Aggregate[T any] struct {
	r       *Repository[T]
	id      string
	stream  string
	state   T
	version varve.Version // of the last stored event in state
	snapped varve.Version // version of the latest snapshot known to exist
	pending []varve.Event
	failed  error // set once a save failed
	cached  bool  // the state came from the cache and may be stale
	// big: the state's encoding was found larger than snapshots in commits
	// take, so saves do not encode it for them.
	big bool
}

// ID returns the aggregate's id.
func (a *Aggregate[T]) ID() string { return a.id }

// Stream returns the name of the aggregate's stream.
func (a *Aggregate[T]) Stream() string { return a.stream }

// State returns the current state, pending events included. Treat it as a
// value: change it only by raising events.
func (a *Aggregate[T]) State() T { return a.state }

// Version returns the stream version the aggregate was loaded or last saved
// at; pending events are not counted. 0 means the stream has no events.
func (a *Aggregate[T]) Version() varve.Version { return a.version }

// Pending returns the number of raised events not saved yet.
func (a *Aggregate[T]) Pending() int { return len(a.pending) }

// Raise records events and applies them to the state, in order. Each event
// must be of a type registered in the repository's [schema.Registry] (a value or a
// pointer to one); it is encoded now, so an unknown type or an encoding
// failure is reported here and nothing of the call is kept.
func (a *Aggregate[T]) Raise(events ...any) error {
	if a.failed != nil {
		return fmt.Errorf("aggregate: raise on %s: %w", a.stream, ErrDiscarded)
	}
	d := &a.r.def
	state := a.state
	n := len(a.pending)
	for _, e := range events {
		ev, v, err := d.Events.Encode(d.Codec, e)
		if err == nil {
			a.pending = append(a.pending, ev)
			state = d.Apply(state, v)
			continue
		}
		clear(a.pending[n:])
		a.pending = a.pending[:n]
		return fmt.Errorf("aggregate: raise on %s: %w", a.stream, err)
	}
	a.state = state
	return nil
}

// discard drops the pending events after a failed save and poisons a.
func (a *Aggregate[T]) discard(err error) {
	a.pending = nil
	a.failed = err
}
