package varve

// Capabilities are the plain facts of what a store can do beyond the core
// of every backend (appends, reads of streams and of $all, stream
// lifecycle). [Store.Capabilities] reports them, each found on the backend
// or down its [Unwrapper] chain. Where a capability is absent its facade
// fails with [ErrNotSupported]; filtered reads, which the Store serves
// itself where the backend cannot, are the exception.
type Capabilities struct {
	// Watch: [Store.Watch] wakes readers when events may have been
	// committed; without it a reader polls.
	Watch bool
	// Filter: filtered reads of $all are served by the backend's indexes
	// ([FilteredReader]) rather than by the Store filtering pages.
	Filter bool
	// Tags: events carry tags, and [Store.AppendIf] and [Store.ReadQuery]
	// work ([TagStore], dynamic consistency boundaries).
	Tags bool
	// PositionNumbers: [Store.NumberPositions] and [Store.PositionOfNumber]
	// name events by integers of at most 53 bits ([PositionNumbers]).
	PositionNumbers bool
	// MultiAppend: [Store.AppendMulti] appends to several streams at once.
	MultiAppend bool
	// Snapshots: [Store.Snapshots] keeps a snapshot per stream.
	Snapshots bool
	// SnapshotsInCommits: snapshots ride in the commit that reaches their
	// version ([CommitSnapshotStore], [Snapshots.Append]).
	SnapshotsInCommits bool
	// Checkpoints: [Store.Checkpoints] keeps named positions.
	Checkpoints bool
	// ListCheckpoints: [Checkpoints.List] lists them.
	ListCheckpoints bool
	// ListStreams: [Streams.List] lists the streams.
	ListStreams bool
	// Leases: [Store.Leases] hands out leases with fenced checkpoint saves.
	Leases bool
	// Keys: [Store.Keys] keeps the wrapped data keys of crypto-shredding
	// ([KeyStore], package shred).
	Keys bool
	// Durable: an acknowledged append, and a saved checkpoint, survive a
	// crash of the process ([Features.Durable]).
	Durable bool
}

// Capabilities returns what the store can do.
func (s *Store) Capabilities() Capabilities {
	return Capabilities{
		Watch:              s.watcher != nil,
		Filter:             s.filtered != nil,
		Tags:               s.tags != nil,
		PositionNumbers:    capability[PositionNumbers](s.b) != nil,
		MultiAppend:        s.multi != nil,
		Snapshots:          s.snaps != nil,
		SnapshotsInCommits: s.inline != nil,
		Checkpoints:        s.cps != nil,
		ListCheckpoints:    s.Checkpoints().lister() != nil,
		ListStreams:        s.Streams().b != nil,
		Leases:             s.leases != nil,
		Keys:               s.Keys().b != nil,
		Durable:            s.b.Features().Durable,
	}
}

// As finds the first of b and the backends it wraps (down [Unwrapper]
// chains) that implements T, as errors.As does for errors: a decorator
// uses it to reach the capability of the backend it wraps.
func As[T any](b Backend) (T, bool) {
	c, depth := capabilityAt[T](b)
	return c, depth >= 0
}

// Unwrapper is a backend that wraps another, such as a decorator that
// traces or counts calls. The Store finds each optional capability on the
// backend itself or, when it lacks it, on the backend that Unwrap returns,
// and so on down: a decorator implements the capabilities it handles and
// lets the others through, without a type per combination of them. A
// wrapper that does not implement Unwrap hides what it does not implement.
type Unwrapper interface {
	Unwrap() Backend
}

// capability returns the first of b and the backends it wraps that
// implements T, or T's zero value.
func capability[T any](b Backend) T {
	c, _ := capabilityAt[T](b)
	return c
}

// capabilityAt is capability, and how many Unwraps down it found T (-1:
// nowhere).
func capabilityAt[T any](b Backend) (T, int) {
	for depth := 0; b != nil; depth++ {
		if c, ok := b.(T); ok {
			return c, depth
		}
		u, ok := b.(Unwrapper)
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	var zero T
	return zero, -1
}
