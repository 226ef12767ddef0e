// Package sqlite is varve's embedded backend: an event store in one SQLite
// file, durable, with no server to run. It is the default of the varve CLI. It
// uses modernc.org/sqlite, a pure Go SQLite, so it builds with CGO_ENABLED=0.
// This is the contract; how it is done and measured figures are in
// docs/backends/sqlite.md.
//
// Open it with [New] and a [Config], or from a URL with [ParseURL] (the query
// parameters are listed there; an unknown one is varve.ErrInvalidArgument):
//
//	sqlite:///var/lib/app/events.db?synchronous=full
//	sqlite::memory:
//
// # Storage
//
// The database runs in WAL mode. Its schema is created and upgraded by the
// embedded migrations (PRAGMA user_version records the version, PRAGMA
// application_id marks the file as varve's), the first of which (version 4,
// the baseline) creates the whole schema; its trigger is restored to the
// package's whenever the file is opened, and a file already up to date is
// opened without a write. A file that is not SQLite, the SQLite database of
// another application, a schema newer than the package and one that a
// development version made before the history was squashed into the baseline
// (version 1 to 3) are refused with an error before anything is written to
// the file. [varve.Position] is {Seq: the event row's INTEGER
// PRIMARY KEY} (Commit is 0). Positions are never reused, also after deletions
// and across restarts. Every event id of an append is checked against its
// stream (Features.UniqueEventIDs): an append whose first id is stored is a
// retry, which returns the original result if its ids are the stored events'
// from that one on, one for one, and fails with varve.ErrDuplicateEvent
// otherwise; any other stored id fails the append with ErrDuplicateEvent.
//
// A database made by this package uses incremental auto-vacuum: the pages
// that deletions and truncations free stay in the file for reuse until
// [Backend.ReclaimSpace] gives them back to the file system (package
// retention's scavenger calls it after a pass that removed events). A file
// made before that keeps auto_vacuum=NONE: its free pages are reused,
// never given back, until a VACUUM with auto_vacuum=INCREMENTAL converts it.
//
// # Concurrency and consistency
//
// A Backend is safe for concurrent use. SQLite allows one writer at a time, so
// the backend has exactly one: a goroutine, started by New and stopped by
// Close, that owns the write connection. Appends, deletions, truncations and
// snapshot, checkpoint and lease writes are queued to it, and it commits
// everything already queued (up to Config.MaxBatchOps writes and
// Config.MaxBatchEvents events, waiting up to Config.MaxBatchDelay, 0 by
// default) in one transaction: one fsync for the group. Each caller gets its
// own result. A write's own failure (a version conflict, a known event id, a
// tombstone) does not affect the others in its group; a storage error (a full
// disk, an I/O error) fails the write that hit it, and the rest are committed
// without it.
//
// [Backend.WriteTx] queues a function like any other write: it runs on the
// writer goroutine in a savepoint of the group's transaction, with a *sql.Tx
// over the writer's connection, so that an application's tables (a read model)
// commit together with varve's writes, such as a checkpoint
// ([AdvanceCheckpoint]); package projection/sqliteprojection builds
// exactly-once projections on it. [Backend.ReadTx] reads one snapshot through
// a *sql.Tx on a read connection. Config.Inline runs an [InlineFunc] in the
// transaction of every append.
//
// Reads use a pool of read-only connections (Config.ReadConns, default 4) that
// read a consistent snapshot while the writer commits; a stream read is one
// statement, so a stream's state and its events come from the same snapshot.
// Because a single writer assigns positions in commit order, every snapshot
// holds a gap-free prefix of the log: a reader of $all that resumes after a
// page's last event misses nothing.
//
// Other processes may open the same file: writes are serialized (they wait up
// to Config.BusyTimeout, default 5s, for the lock) and positions stay
// gap-free, but group commit only merges the writes of one process.
//
// An in-memory database (":memory:") has a single connection, which the writer
// and the readers take turns on. It is meant for tests; it is not durable
// (Features.Durable is false).
//
// # Capabilities
//
// Snapshots, checkpoints, stream and checkpoint listings, filtered reads of
// $all (varve.Filter, by index), appends to several streams
// (varve.MultiAppender), tags and conditional appends (varve.TagStore),
// position numbers (varve.PositionNumbers: an event's number is its
// position, up to 2^53-1), leases ([varve.LeaseStore]) and the keys of
// crypto-shredding ([varve.KeyStore]). Snapshots kept in commits
// (varve.CommitSnapshotStore) are not supported. Leases live in the file,
// shared by the processes that open it; expiry is judged by each process's
// clock. A fenced checkpoint save with a token older than the lease's is
// refused with varve.ErrLeaseLost, in the writer's transaction.
//
// Keys are rows of the file, written by the writer like leases. A deletion,
// and a rewrap, run with PRAGMA secure_delete, so that SQLite overwrites the
// bytes they remove in the pages it writes. After the commit of a deletion
// the writer runs PRAGMA wal_checkpoint(TRUNCATE) (the writes queued
// meanwhile wait), and DeleteKey returns after it: the overwritten page is
// in the file and the WAL, which held the old one, is truncated to nothing.
// That checkpoint is best effort: a reader of an older snapshot (another
// process's, or a [Backend.ReadTx]) that outlasts Config.BusyTimeout keeps
// the WAL, and the deletion is done all the same
// ([Stats].KeyCheckpointsBusy counts it); a later checkpoint copies the
// page, and the WAL's frames are overwritten as it is reused. What the file
// system, the disk, backups and copies of the file kept is beyond the
// backend. In memory, the deletion is all there is.
//
// # Wake-ups
//
// [Backend.Watch] (which [varve.Store.Watch] hands out) wakes a reader that
// follows the log: at once after a commit of this backend's writer, and within
// about [Config.WatchInterval] (default 10ms) after a commit through any other
// connection to the file: another process, or another Backend of this process.
// For the latter a second goroutine, started by New for a file and stopped by
// Close, reads PRAGMA data_version only while somebody waits. This backend's
// own commits may wake readers twice, and a channel taken from Watch and never
// waited on counts as a waiter until the next wake-up. A failed check wakes
// the waiters, so that they read for themselves, and never stops the backend.
// A file renamed or replaced while open is not followed: like the backend's
// other connections, the watcher keeps the file it opened.
//
// # Durability
//
// [SyncFull], the default, syncs the WAL at every commit: an acknowledged
// append survives a crash of the process and a loss of power. [SyncNormal]
// syncs it at checkpoints only: an acknowledged append survives a crash of the
// process, while a power loss may lose the last commits (never the consistency
// of the file). A write beyond Config.MaxSize (PRAGMA max_page_count) fails
// with SQLite's "database or disk is full" and leaves the file intact;
// Config.QuickCheck runs PRAGMA quick_check at open and refuses a damaged
// file.
package sqlite
