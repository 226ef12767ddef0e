// Package postgres is the PostgreSQL backend of varve: an event store in
// one schema of a PostgreSQL (13 or later) database, reached through a pgx
// v5 connection pool.
//
//	cfg, err := postgres.ParseURL("postgres://user@127.0.0.1/db?varve_schema=orders")
//	b, err := postgres.New(ctx, cfg)
//	store, err := varve.New(b, varve.Config{})
//
// # Schema
//
// New creates the schema (default "varve") and applies the embedded
// migrations under an advisory lock, so processes that start together do not
// race; Config.NoMigrate leaves that to the operator. The schema holds
// streams (one row per stream: version, flags, times), events, snapshots,
// checkpoints and PL/pgSQL functions: append, delete_stream,
// truncate_stream and all_horizon. Each mutation is one round trip in an
// implicit transaction (one statement; a conditional append on tags sends
// its locks and its append as two statements in one pipeline), so an
// append costs one round trip whatever its size; [Backend.Requests] counts
// the round trips. Connections run in read committed whatever the
// connection string or the server's default says: every statement takes
// its own snapshot, which the appends rely on. They run without JIT unless
// the connection string sets jit: the statements are short, but some are
// estimated above jit_above_cost on a large store, and a cached plan with
// JIT is compiled at every execution (TestJIT).
//
// Any schema name PostgreSQL allows works as given, up to 63 bytes: quotes,
// spaces, upper case, "$$", line breaks. The migrations name the schema only
// through placeholders that the loader writes for the place they stand in (a
// quoted identifier in SQL, escaped inside a string literal, a function body
// closed by a tag the name does not hold), and literals are read with
// standard_conforming_strings on; no other statement takes the name but as
// a quoted identifier (TestSchemaNames, TestExpand). Migration 4 repairs
// schemas that an older loader created under a name that broke out of a
// literal (TestRepairInjectedSchema). Refused with ErrInvalidArgument: NUL
// (PostgreSQL cannot store it), names over 63 bytes (PostgreSQL would cut
// them, and two names would be one schema), names PostgreSQL reserves (pg_*,
// information_schema) and public, which belongs to the whole database (its
// objects would mix with varve's, and Drop would remove them).
//
// Connecting is bounded by Config.ConnectTimeout, or the connection string's
// connect_timeout, or DefaultConnectTimeout (10s): a server that accepts TCP
// connections and never answers fails New (TestConnectTimeout). ParseURL
// refuses malformed query strings and unknown varve_* parameters, and no
// error of this package shows a password (FuzzParseURL).
//
// # Gap-free $all
//
// A sequence number is assigned at insert, but transactions commit in
// another order, so a reader that checkpoints at position P while the
// transaction that holds P-1 is still open skips P-1 for ever. Each event
// row therefore stores its transaction's id (pg_current_xact_id, 64 bits,
// never reused) as tx, and [varve.Position] is (Commit: tx, Seq: sequence).
// ReadAll orders by (tx, seq) and reads only rows whose tx is below a
// horizon H that the same statement computes from its own snapshot S; a
// transaction that ended before S is in S (its rows if it committed), one
// that S sees running is not.
//
// Writers announce themselves. Every transaction that may insert events
// holds the schema's writer lock, a shared transaction-level advisory lock,
// from before it has a transaction id until it ends: the fast append's first
// write is the stream's row, and the default of a column of streams takes
// the lock for it, as the row's values exist before the row is written (so
// do the appends of older versions of varve while processes are upgraded
// one by one); the append function takes it first. Writers share the lock,
// so they never wait for each other.
//
// H (all_horizon, migrations 5 and 11) is the smallest of S's xmax and of
// the ids that S sees running, leaving out each id that the lock table, read
// after S in the same statement, shows held (the ExclusiveLock a transaction
// takes on its own id) by a process that does not hold the writer lock. When
// S sees no id running below its xmax, H is xmax and the lock table is not
// read. The two locks are matched by the holder's process id, which does not
// change while it holds them; migration 5 matched them by virtual
// transaction id, which a committing transaction clears before it releases
// its locks and which the lock table copies entry by entry, so a writer that
// committed just after S could show two different ones and be taken for a
// non-writer (a reader at the head of $all then skipped it; TestHorizonAtHead).
//
// No event can later appear below H. Take a writer W with id T < H. If W
// got T after S was taken, T >= xmax(S) >= H. So W got T before S; if S saw
// W running, T was left out: the lock table showed T's lock held without the
// writer lock. But W took the writer lock before T existed and keeps it
// until T's lock is gone (PostgreSQL releases transaction-level advisory
// locks after all others at commit and abort), and which locks are held is
// read as one consistent picture (under all the lock table's partition
// locks), so W's process held both in it: a contradiction. Hence W had ended before S, and its rows are in S or
// never will be. A reader that resumes after the last event of a page misses
// nothing. The cases the rule does not decide count as writers and only hold
// $all back until the next read: a transaction that ended between S and the
// read of the lock table (it is not in the table), one that has its id but
// has not yet locked it (PostgreSQL takes that lock just after assigning the
// id). An event written in a transaction that had an id before it took the
// writer lock (by hand, in a transaction that wrote something else first)
// breaks the rule; only this package writes events.
//
// So only this schema's writers hold $all back: an append in flight for its
// own duration, a slow or idle writer for as long as it is open, and $all
// then resumes in order with nothing skipped and nothing rolled back shown
// (TestHorizon, the adversarial TestAdversarialCatchUp, and the suite's
// CatchUp check it). A transaction that writes no events does not: an ETL
// job, a session idle in transaction, a forgotten prepared transaction, a
// writer of another schema or database. TestForeignTransactions holds such
// a transaction open while a subscriber follows $all: with one open 10s in
// another database (or writing in the same one), the subscriber saw each
// append 1ms after it was acknowledged (median; 5-8ms at most), against
// 5.3s (median) and 10.0s (at most) with the horizon of the whole server,
// which the schema used before. That horizon, the xmin of S, is still used
// on a standby (whose snapshots list no ids) and for a schema older than
// migration 5 opened with NoMigrate. Stream reads have no horizon.
//
// Per-stream order in $all needs one more step: a transaction that writes
// version v+1 must get its id after the writer of v committed. Every append
// therefore reads the stream's row in a snapshot taken before its
// transaction has an id, and writes only if the row is still that very
// tuple (same xmin) when it updates it: the update locks the latest tuple,
// so a writer that committed in between makes the append step back. Ids,
// and with them $all, then follow version order. Locking the row FOR UPDATE
// instead is not enough: a waiter can be given its id before it gets the
// lock, and TestSameStreamOrder saw $all with versions out of order within
// a few hundred appends. Appends to different streams touch different rows
// and commit in parallel, sharing PostgreSQL's group commit.
//
// # Appends
//
// An append is one statement in the common case (queries.go): it reads the
// stream row, upserts it with the new version if its xmin is unchanged and
// the stream is neither deleted nor tombstoned, and inserts the events (one
// row from scalar parameters, a batch from arrays with unnest). Statement
// and transaction are the same, so the append costs one round trip and
// holds the row's lock only while its own commit is flushed. When that
// statement declines (no row back: a wrong expected version, a deleted or
// tombstoned stream, a writer in between) or trips a unique index (an
// idempotent retry, a duplicate id), the append function decides in a
// second round trip: it refuses a tombstone (ErrStreamDeleted), recognizes
// an idempotent retry by the first event id (a unique index on (stream,
// id)), checks the expected version, and appends with the same compare-and-
// set. Conflicts are raised with SQLSTATEs VV001..VV005 and mapped to
// varve's sentinels; a known id later in a batch trips the unique index
// (23505), which is ErrDuplicateEvent, so the backend declares
// Features.UniqueEventIDs. A writer that lost a race for the row (VV005, or
// a unique violation of the row or a version) runs again. Delete and
// Truncate lock the row FOR UPDATE, so they wait for an append in flight,
// and then remove the events in a fresh snapshot; deleted events leave
// $all and their positions are not reused. TestStreamRowRaces races all of
// these on the same streams.
//
// # Reads
//
// ReadStream answers in one statement (the stream row left-joined to a page
// of its events) and so tells a missing, deleted or tombstoned stream from
// an empty page. Rows are decoded from the binary protocol straight into
// the page: the text of a page shares one string and the data and metadata
// one byte slice, so a page of 512 events took 49 allocations against 4,608
// for the same page read with rows.Scan.
//
// # Watch
//
// [Backend.Watch] wakes this process's watchers at each of its commits, and
// other processes' through LISTEN/NOTIFY. NOTIFY is not sent inside the
// append: PostgreSQL serializes the commits of notifying transactions on one
// lock, which would undo group commit. A notifier goroutine sends one NOTIFY
// per burst of commits instead, at most one per Config.NotifyInterval. The
// first Watch starts a listener goroutine on its own connection; it also
// wakes watchers every Config.WatchPoll, which covers commits that were held
// back behind an older transaction when their notification came.
//
// # Reading from a hot standby
//
// A store can be opened on a streaming replica (hot standby) of the
// primary, to take reads off it: New sees pg_is_in_recovery() and does not
// migrate (the standby has the primary's schema through the WAL; a schema
// the standby does not have yet fails New with [ErrStandby], so open the
// primary first). Reads work as on the primary; every write (append,
// delete, truncate, snapshot or checkpoint save) fails with [ErrStandby],
// wrapping the server's read-only error (SQLSTATE 25006). A subscription
// on the standby keeps its checkpoints elsewhere: subscription.Config's
// Checkpoints can be the primary's backend. A backend opened on a standby
// stays a standby's: after a promotion, open it again.
//
// $all on the standby is gap-free by the older rule of the section above:
// the standby cannot see the primary's writer locks, so its horizon is the
// xmin of its own snapshot, which the primary's running transactions hold
// back (the standby learns of each id from the WAL, and counts the ids
// below the highest it saw as running until it replays their end). So on a
// standby $all waits for every transaction open on the primary that has a
// transaction id, in any database, not only for this schema's writers.
// Watch on a standby cannot LISTEN (a standby refuses it, and the primary's
// NOTIFYs are not replicated): its watchers are woken every
// Config.WatchPoll, which bounds how late a caught-up subscription sees an
// event beyond the replication lag. [Backend.StandbyStatus] reports the
// WAL received and replayed and the time since the last replayed commit.
//
// TestStandby starts a private primary and a standby made by pg_basebackup
// (package internal/pgcluster; skipped with a loud message where the
// binaries are missing, failed with CI=true), appends 1,200 events from 4
// writers on the primary and follows them with a subscription on the
// standby: every event came once, in the primary's order, and the
// standby's $all equals the primary's. From acknowledgement on the
// primary to delivery on the standby (WatchPoll 5ms, both servers with
// fsync off, on this 2-core machine beside other tests): median 3.5-6.6
// ms, 90th percentile 23-30 ms, at most 32-51 ms in 3 runs; the standby's
// time since its last replayed commit, sampled every 20 ms during the
// load, was at most 7.5-42 ms.
//
// # Errors
//
// The Store names the operation and the stream, so this package returns the
// sentinels and conflicts bare and adds "postgres:" only before words of its
// own, the server's (with the SQLSTATE) or the driver's. What the server
// refuses in a request's bytes or sizes is ErrInvalidArgument with the
// server's words: text not valid in the database's encoding (SQLSTATE 22021,
// 22P05), a value over one of its limits (class 54, such as an index row
// over 2704 bytes), a message over the protocol's 1 GiB (TestRefusedInput).
//
// # Concurrency
//
// A Backend is safe for concurrent use. It owns at most two goroutines, the
// notifier (unless Config.NoNotify) and the listener (after the first
// Watch); Close stops both and closes the pool, and is idempotent. Every
// call checks for Close and for its context first and returns ErrClosed or
// the context's error. A context that ends while a statement runs sends
// PostgreSQL a cancel request (the connection is dropped if the statement
// has not stopped a second later), so an append that waits for its stream's
// row is aborted, not written once the row comes free (TestCancelWhileLocked).
// That connection is closed when it is released, never reused: a cancel
// request can reach the server late and would cancel its next statement.
// As with any database, a cancel can still lose the race with the commit:
// the append's outcome is then unknown to the caller, and retrying it with
// the same event ids is safe.
//
// # Figures
//
// Measured on this project's 2-core machine against PostgreSQL 15 on
// loopback (synchronous_commit on), beside other work on the machine. Each
// benchmark alternates varve with its baseline in the same loop, so the
// ratio is what to read; noise on this machine moves the absolute rates by
// up to 2x between runs. BenchmarkTargets, against issue 3's baselines (a
// plain single-row INSERT in autocommit into a bare table, CopyFrom of 100
// rows), throughput ratio varve/base, three runs of
// `go test -run '^$' -bench Targets -benchtime 2s`:
//
//	append 1 event, 1 client          0.81-0.83x the bare INSERT
//	append 1 event, 8 clients         0.83-0.85x the bare INSERT from 8 clients
//	8 clients vs 1                    2.6-3.3x (the bare INSERT: 2.6-3.2x)
//	append 100 events                 0.51-0.56x CopyFrom of 100 rows
//
// BenchmarkAppend, AppendParallel and Read, against plain pgx statements on
// a table with a primary key and a (stream, version) index, time ratio
// varve/base (below 1 is faster), two runs of `-benchtime 2s`:
//
//	append 1 event, 1 writer          1.13-1.14x the one-row INSERT
//	append 100 events, 1 writer       1.25-1.32x the unnest INSERT of 100 rows
//	append 1 event, 16 writers        1.05-1.08x 16 writers of single INSERTs
//	$all page of 512                  0.92-0.99x SELECT ... ORDER BY seq + Scan
//	stream page of 100                0.95-1.01x SELECT by (stream, version) + Scan
//
// The writer lock and the writers' horizon, three runs each of
// `-bench WriterLock -benchtime 3s` (appends to a schema with the lock and
// to one without, alternately) and `-bench BenchmarkHorizon -benchtime 3s`
// (pages of $all read with the writers' horizon and with the xmin of the
// whole server, alternately, with no appends running and beside four
// appenders), time ratio:
//
//	append, 1 writer                  1.01-1.02x without the lock
//	append, 16 writers                1.00x
//	$all page of 512, idle            0.94-1.01x the xmin horizon
//	$all page of 7, idle              1.09-1.12x
//	$all page of 512, 4 appenders     1.06-1.10x
//	$all page of 7, 4 appenders       1.24-1.30x (121-134us against 154-173us)
//
// A read pays for the lock table only while some transaction runs, which
// with appends in flight is most of the time: 30-40us here, felt by small
// pages; while other work loaded the machine, 60-70us (1.58-2.04x for pages
// of 7). Appends beside a reader that reads pages of 7 as fast as it can
// were within the noise of the same with the xmin horizon
// (BenchmarkAppendBesideReader: 0.88-1.12x).
package postgres
