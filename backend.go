package varve

import "context"

// Backend is the storage seam under a [Store]. Third parties may implement
// it: a backend that passes the conformance suite of backend/backendtest is
// a varve backend. The seam may still change while varve is at v0; each
// change is in the changelog. The Store validates every
// request before it reaches the backend: stream ids, event types and sizes are
// within limits, every event has an id and the ids of one append are distinct,
// the context is not yet done. A backend stores and reads, nothing else, and
// must be safe for concurrent use.
//
// Errors: a backend returns the root sentinels ([ErrWrongExpectedVersion] as a
// [*WrongExpectedVersionError], [ErrStreamNotFound], [ErrStreamDeleted],
// [ErrDuplicateEvent], [ErrClosed]) wrapped with %w, and the context's error
// when the context ends. The Store names the operation and the stream, so a
// backend's error text adds only what is its own ("postgres: SQLSTATE ...")
// and never repeats the stream id. The conformance suite in
// backend/backendtest checks all of it.
type Backend interface {
	// Append writes req.Events atomically at the end of req.Stream. See the
	// package documentation for idempotent retries.
	Append(ctx context.Context, req AppendRequest) (AppendResult, error)

	// ReadStream appends to buf at most q.Limit events of q.Stream, starting
	// at q.From (inclusive) in q.Direction, and returns the extended slice;
	// with q.MaxBytes it stops after the event that reaches that budget.
	// Fewer than q.Limit events, within the budget, means the end of the
	// stream was reached.
	// A stream that does not exist or was deleted gives ErrStreamNotFound; a
	// tombstoned one ErrStreamDeleted.
	ReadStream(ctx context.Context, q StreamQuery, buf []RecordedEvent) ([]RecordedEvent, error)

	// ReadAll appends to buf at most q.Limit events of the global log whose
	// positions are after q.After, in position order, and stops after the
	// event that reaches q.MaxBytes when that is set. It must never return an
	// event at a position before one that may still commit later: a reader
	// that resumes after the last event of a page misses nothing. With
	// q.Direction Backward it appends the events before q.Before (from the
	// newest when q.Before is Start) in reverse position order, with the
	// same bounds; fewer than q.Limit within the budget means the start
	// of the log was reached.
	ReadAll(ctx context.Context, q AllQuery, buf []RecordedEvent) ([]RecordedEvent, error)

	// LastPosition returns a position at or after the last event a ReadAll
	// can return now and before every event that commits later; Start when
	// the log is empty. Subscriptions that start "from the end" start there.
	LastPosition(ctx context.Context) (Position, error)

	// StreamInfo describes a stream; ErrStreamNotFound if it never existed.
	// Deleted and tombstoned streams are described with their flags set.
	StreamInfo(ctx context.Context, stream string) (StreamInfo, error)

	// Truncate removes the stream's events with versions below before.
	Truncate(ctx context.Context, stream string, before Version) error

	// Delete removes every event of the stream if its version matches
	// expected. With tombstone the stream can never be written again.
	Delete(ctx context.Context, stream string, expected ExpectedVersion, tombstone bool) error

	// Features states facts about the backend.
	Features() Features

	// Close releases the backend; it is idempotent. Later calls fail with
	// ErrClosed.
	Close() error
}

// AppendRequest is a validated append: 1..MaxAppendEvents events, each with
// a non-zero, distinct id.
type AppendRequest struct {
	Stream   string
	Expected ExpectedVersion
	Events   []Event
	// Category is the stream's category ([Store.Category]); a backend that
	// implements [FilteredReader] stores it with each event.
	Category string
}

// Direction is the order of a stream read.
type Direction uint8

const (
	Forward Direction = iota
	Backward
)

// StreamQuery asks for one page of a stream.
type StreamQuery struct {
	Stream    string
	Direction Direction
	// From is the first version to return: 0 means the first event
	// (forward) or the last event (backward).
	From  Version
	Limit int
	// MaxBytes, when > 0, is the page's byte budget: the backend adds no
	// event after the one that brings the sum of [RecordedEvent.Size] over
	// the events it added to MaxBytes or beyond. That event is added, so a
	// page holds at least one event when one is readable. A backend should
	// hold no more event data than the budget and one event while it builds
	// the page; where it holds more, its package documentation says so.
	// 0: no byte bound. The same holds for the MaxBytes of
	// [AllQuery], [FilterQuery] and [QueryRequest].
	MaxBytes int
}

// AllQuery asks for one page of the global log.
type AllQuery struct {
	After Position
	Limit int
	// MaxBytes is the page's byte budget, as in [StreamQuery].
	MaxBytes int
	// Direction Backward asks for the events before Before instead, newest
	// first, from the newest event a forward read could return now when
	// Before is Start; After is then unused. A backward page is a view of
	// what is readable now: an event that commits later below its
	// positions is not in it.
	Direction Direction
	Before    Position
}

// Features are facts a backend states about itself: its name, whether an
// acknowledged append survives a crash, how it checks event ids, its limits.
// Optional capabilities are not flags: a backend has one when it implements
// the capability's interface ([SnapshotStore], [CheckpointStore],
// [Watcher], [FilteredReader]), and the [Store] hands each out behind its
// facade ([Store.Snapshots], [Store.Checkpoints], [Store.Watch], a
// [Filter] on reads of the global log).
type Features struct {
	// Name identifies the backend in reports ("memory", "sqlite", ...).
	Name string
	// Durable: an acknowledged append survives a crash of the process.
	Durable bool
	// UniqueEventIDs: every event id is checked against the whole stream, not
	// only the first id of an append, so a later duplicate id fails the
	// append with ErrDuplicateEvent.
	UniqueEventIDs bool
	// MaxEventSize, when not 0, is the largest len(Data)+len(Metadata) the
	// backend can store; the Store lowers its own limit to it.
	MaxEventSize int
}
