// Package aggregate keeps event-sourced aggregates in a [varve.Store]: a
// generic [Repository] loads an aggregate by replaying its stream (from its
// latest snapshot when snapshots are on, or from an LRU cache), lets a
// command raise events, and saves them at the version it loaded, so that
// concurrent writers conflict instead of overwriting each other.
//
// # Model
//
// An aggregate of kind T lives in the stream Category-id. Its state is a T
// that changes only through events: a command calls [Aggregate.Raise], which
// encodes each event with the [schema.Codec] (JSON by default) under the name it
// was given in the [schema.Registry], and passes it to the pure function
// Definition.Apply, which returns the next state. Loading replays the same
// function over the stored events. A stored event whose type is not in the
// registry fails the load with [schema.ErrUnknownEventType] (a
// [*schema.UnknownTypeError] that names the type); so does raising one.
//
// The registry is package schema's, which projections use too: events
// stored under a type's old name ([schema.Registry.Alias]) or at an older
// schema version of its payload ([schema.RegisterVersion],
// [schema.Registry.Upcast]) load as today's Go type. [New] validates the
// registry ([schema.Registry.Validate]), so that a missing upcaster or an
// alias of an unregistered type stops the repository at start-up rather
// than a load later.
//
// [Repository.Save] appends the pending events with the expected version
// the aggregate was loaded at. [Repository.Execute] runs a command and
// saves it, and on [varve.ErrWrongExpectedVersion] reloads and runs it again,
// a bounded number of times. [Repository.ExecuteOnce] does so at most once
// per command id: a retry of a command whose events are stored writes
// nothing and returns their versions, across processes and lost answers.
//
// # Snapshots
//
// With Config.SnapshotEvery = N the repository writes the encoded state
// through the backend's [varve.SnapshotStore] once a save takes an aggregate
// N or more events past its latest snapshot, tagged with
// Definition.SchemaVersion. A load starts from the latest snapshot whose
// schema version is the definition's and reads only the events after it; a
// snapshot of another schema version is ignored and the state rebuilt from
// all events. With N = 0 the repository reads and writes no snapshots at all.
//
// On a store that keeps snapshots in commits ([varve.Capabilities] SnapshotsInCommits:
// the NATS backend) every save of a state that encodes to at most
// Config.SnapshotInCommitMax bytes (default 4 KiB) keeps it in the save's
// own commit ([varve.Snapshots.Append]), which costs no request, and a load
// reads the snapshot and the events after it together
// ([varve.Snapshots.Read]): one request when the stream's last commit is
// such a save, so a load and a save of an aggregate are two requests. A
// larger state is snapshotted every N events as above. A stream whose last
// commit another writer made (a plain append) loads from the
// latest snapshot saved the way above, which for a small state is none:
// that load replays the whole stream, and the next save keeps the state in
// its commit again.
//
// # Cache
//
// With Config.CacheSize > 0 the repository keeps the states of up to that
// many aggregates (github.com/maypok86/otter/v2, bounded by count). A cached
// aggregate is loaded without reading the store; if another writer has moved
// its stream on, the save's expected version fails, and every failed save
// evicts the cached copy, so the next load, or Execute's retry, reads the
// store afresh. A command that Execute runs on a cached copy and that fails
// is run once more on the stored state, so a stale copy can't make it fail
// either. Cache entries hold states at stored versions only, never
// pending events: the events of a failed save are dropped with the
// aggregate that raised them, which can then no longer be saved
// ([ErrDiscarded]).
//
// # Concurrency
//
// A Repository is safe for concurrent use; an [Aggregate] belongs to the
// goroutine that loaded it. Every load returns a new Aggregate, and a cached
// state is handed out as a copy (by assignment when T holds no references,
// else with Definition.Clone or through the Codec), so no two goroutines
// ever change the same aggregate value. Execute runs the commands of one
// repository on one aggregate id one at a time (a lock per id, waited for
// with the context), so goroutines of one process do not conflict with each
// other. The repository starts no goroutines of its own; the cache runs its
// short maintenance tasks on goroutines that end by themselves.
//
// # Limits
//
// The repository cannot tell a snapshot of a deleted and re-created stream
// from a current one when the new stream is already longer than the
// snapshot; Execute detects the shorter case by the conflict it causes and
// rebuilds from the events. A stream truncated without a snapshot at or after
// the truncation point loads without its early events. Where states are kept
// in commits, the snapshot at or after the truncation point is the one in
// the stream's last commit (a truncation carries it on, on NATS): truncate
// an aggregate's stream when its last commit is a save of the repository,
// not after another writer's append.
package aggregate
