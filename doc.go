// Package varve is an event store for Go: streams of events with optimistic
// concurrency, atomic batch appends, and reads in both directions of streams
// and of a gap-free global log ($all) with totally ordered positions.
//
// A [Store] is a facade over a [Backend]. The Store validates input, applies
// defaults, generates event ids and turns the backend's pages into iterators,
// so a backend implements only storage. Backends live in sub-packages:
// backend/memory (the reference), backend/sqlite (the embedded, durable
// default), backend/postgres and backend/nats. Every backend passes the same
// conformance suite in backend/backendtest.
//
// # Semantics
//
// Stream versions start at 1; a stream with no events has version 0. An
// append of 1..N events to one stream is atomic: all of them are written at
// consecutive versions, or none. The [ExpectedVersion] of an append is [Any],
// [NoStream], [StreamExists] or an exact version ([Exact]); a mismatch fails
// with a [*WrongExpectedVersionError] that matches [ErrWrongExpectedVersion].
//
// Appends are idempotent by event id: when the first event id of an append
// is already in the stream and the request's ids match the stored events one
// for one, the original [AppendResult] is returned and nothing is written,
// whatever the expected version says. An append whose first id is in the
// stream but that is not such an exact retry fails with [ErrDuplicateEvent].
//
// The global log orders every event of every stream by [Position]. A reader
// that follows $all with [Store.ReadAll] from its last position never skips a
// committed event and never sees an event of a failed append. With
// ReadBackward it reads the log newest first, as a browser does: a view of
// what is readable at the time of each page.
//
// Truncating a stream removes its events before a version; deleting it removes
// all of them (a later append with [NoStream] or [Any] starts it afresh at
// version 1); a tombstone removes them for good and every later append fails
// with [ErrStreamDeleted]. Removed events disappear from $all too; positions
// are never reused.
//
// # Concurrency
//
// A Store is safe for concurrent use by many goroutines. Iterators returned by
// reads are not; each iteration reads the backend lazily, a page at a time.
// The Data and Metadata slices of a [RecordedEvent] are shared with the
// backend where it can avoid a copy and must not be modified.
package varve
