// Package sqlite is varve's embedded backend: an event store in one SQLite
// file, durable, with no server to run. It is the default of the varve CLI.
// It uses modernc.org/sqlite, a pure Go SQLite, so it builds with
// CGO_ENABLED=0.
//
// Open it from a URL with [ParseURL] and [New]:
//
//	sqlite:///var/lib/app/events.db?synchronous=full
//	sqlite::memory:
//
// # Storage
//
// The database runs in WAL mode. Its schema is created and upgraded by the
// embedded migrations in migrations/ (PRAGMA user_version records the
// version, PRAGMA application_id marks the file as varve's). A file that is
// not SQLite, or the SQLite database of another application, is refused
// with an error before anything is written to it.
//
// Events live in one table whose INTEGER PRIMARY KEY is the global
// position, with unique indexes on (stream, version) for stream reads and
// on (stream, event id) for idempotent retries and [varve.Features]
// UniqueEventIDs. An append writes these three b-trees and nothing else: a
// stream's version and last position are those of its last event. Deleted
// and tombstoned streams keep their row with a state flag. The highest
// position ever assigned is kept before events are removed, so positions
// are never reused, also across restarts.
//
// # Concurrency
//
// SQLite allows one writer at a time, so the backend has exactly one: a
// goroutine, started by New and stopped by Close, that owns the write
// connection. Appends, deletions, truncations and snapshot and checkpoint
// saves are queued to it. It takes the first queued write and everything
// else already queued (up to MaxBatchOps writes and MaxBatchEvents events,
// waiting up to MaxBatchDelay, 0 by default) and commits them in one
// BEGIN IMMEDIATE transaction: one fsync for the whole group. Each caller
// still gets its own result. A write's own failures (a version conflict, a
// known event id, a tombstone) are found before it writes anything or are
// undone with a savepoint, and the others in the group go on. A storage
// error (a full disk, an I/O error) rolls the transaction back; the write
// that hit it fails with the error, and the rest are committed again
// without it. After a group of more than one write the writer yields once
// before cutting the next group, so that the callers it has just woken can
// queue their next writes; a lone writer does not wait at all.
//
// [Backend.WriteTx] queues a function like any other write: it runs on the
// writer goroutine in a savepoint of the group's transaction, with a
// *sql.Tx over the writer's connection, so that an application's tables
// (a read model) commit together with varve's writes, such as a checkpoint
// ([AdvanceCheckpoint]); package projection/sqliteprojection builds
// exactly-once projections on it. [Backend.ReadTx] reads one snapshot
// through a *sql.Tx on a read connection.
//
// Reads use a separate pool of read-only connections (ReadConns, default 4),
// which in WAL mode read a consistent snapshot while the writer commits.
// A stream read is one statement, so a stream's state and its events come
// from the same snapshot.
//
// Because a single writer assigns positions in commit order, every snapshot
// a reader sees holds a gap-free prefix of the log: $all is read with
// "position > after ORDER BY position" and needs no gap logic (PostgreSQL,
// with concurrent writers, does). Other processes may open the same file:
// BEGIN IMMEDIATE and the busy timeout serialize them and positions are
// read inside the transaction, but group commit only merges the writes of
// one process.
//
// An in-memory database (":memory:") belongs to the connection that opened
// it, so that backend has a single connection which the writer and the
// readers take turns on. A shared cache would give readers their own
// connections, but with table-level locks they would wait for the writer
// all the same. It is meant for tests; it is not durable.
//
// # Wake-ups
//
// [Backend.Watch] (which [varve.Store.Watch] hands out) wakes a reader that
// follows the log: at once after a commit of this backend's writer, and
// within about [Config.WatchInterval] (default 10ms) after a commit through
// any other connection to the file: another process, or another Backend of
// this process. For the latter a second goroutine, started by New for a
// file (an in-memory database has no other connection) and stopped by
// Close, reads PRAGMA data_version on a read-only
// connection of its own, at most once per WatchInterval and only while
// somebody waits; nobody waiting, it sleeps and the connection stays idle.
// The value also changes with this backend's own commits, so those wake
// readers twice, and a channel taken from Watch and never waited on counts
// as a waiter until the next wake-up. A failed check (the file cannot be
// opened) wakes the waiters, so that they read for themselves, and is
// retried on a new connection after a back-off of up to a second; it never
// stops the backend. A file renamed or replaced while open is not
// followed: like the backend's other connections, the watcher keeps the
// file it opened.
//
// # Durability
//
// [SyncFull], the default, syncs the WAL at every commit: an acknowledged
// append survives a crash of the process and a loss of power. [SyncNormal]
// syncs it at checkpoints only: an acknowledged append survives a crash of
// the process, while a power loss may lose the last commits (never the
// consistency of the file). TestCrashSafety kills a child process that
// appends with SIGKILL at random moments, in both modes, and finds every
// acknowledged append, whole. A write beyond MaxSize (PRAGMA
// max_page_count) fails with SQLite's "database or disk is full" and
// leaves the file intact; QuickCheck runs PRAGMA quick_check at open.
//
// # Driver use and measured figures
//
// The backend uses the database/sql/driver interfaces of modernc.org/sqlite
// directly: statements are prepared once per connection and reused, rows
// are read without database/sql's second copy of every value, and no pool
// lock is taken per statement. Events are inserted up to 32 rows per
// statement, so a statement's fixed cost is paid once per 32 events.
//
// The benchmarks in bench_test.go alternate varve with a baseline in every
// iteration and report ratios: a bare INSERT of the same payload, one
// transaction each, with the same pragmas and driver path, and the same
// INSERT into a table with varve's three b-trees. Medians of 5 runs
// (ranges in parentheses) on a 2-core VM shared with other builds, load
// average about 4, go test -bench with -benchtime 500x (100x for the
// concurrent rows, 300x for reads). Session B, with an fsync of about
// 0.3 ms; session A, an hour earlier, had fsyncs of about 0.6-1.2 ms:
//
//	workload                         varve ev/s  ratio, session B      ratio, session A
//	single appends, 1 goroutine, FULL      2.6k  0.98x INSERT (0.87-1.07) 0.87x (0.78-1.01)
//	single appends, 1 goroutine, NORMAL   12.0k  0.33x INSERT (0.32-0.34) 0.31x (0.27-0.34)
//	  the events-shaped INSERT, NORMAL    17.4k  0.48x INSERT (0.46-0.52) 0.44x (0.39-0.53)
//	single appends, 8 goroutines, FULL    12.4k  4.2x 1 goroutine (3.9-4.7) 4.6x (2.9-4.8)
//	  appends per commit                          6.6                   6.1
//	single appends, 8 goroutines, NORMAL  18.9k  1.5x 1 goroutine (1.3-1.8) 1.9x (1.8-2.4)
//	appends of 100 events, NORMAL           94k  0.42x INSERTs (0.41-0.44) 0.44x, 108k ev/s
//	appends of 100 events, FULL             85k  0.59x INSERTs (0.59-0.63) 0.66x, 79k ev/s
//	load a 1,000-event stream              609k  0.55x SELECT (0.53-0.57)  0.57x, 355k ev/s
//	the same events through $all           626k  0.56x SELECT (0.56-0.59)  0.52x, 426k ev/s
//
// (Session A ran before the writer yielded more than once while callers
// requeue; "INSERTs" is 100 bare INSERTs in one transaction, "SELECT" a
// bare SELECT of 1,000 rows.) The slower the sync, the more group commit
// gains; with NORMAL, appends are bound by the CPU, which two shared cores
// leave little of.
//
// With FULL the fsync dominates and varve is close to a bare INSERT. With
// NORMAL a commit costs a few page writes, and each of varve's three
// b-trees adds one page to every commit: that, not the machinery, is most of
// the gap; handing the append to the writer goroutine and back is most of
// the rest. Reading is bound by the driver's per-column calls, each of which
// takes the connection's mutex.
package sqlite
