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
// checkpoints and three PL/pgSQL functions: append, delete_stream and
// truncate_stream. Each mutation is one statement in an implicit
// transaction, so an append costs one round trip whatever its size;
// [Backend.Requests] counts the statements sent.
//
// # Gap-free $all
//
// A sequence number is assigned at insert, but transactions commit in
// another order, so a reader that checkpoints at position P while the
// transaction that holds P-1 is still open skips P-1 for ever. Each event
// row therefore stores its transaction's id (pg_current_xact_id, 64 bits,
// never reused) as tx, and [varve.Position] is (Commit: tx, Seq: sequence).
// ReadAll orders by (tx, seq) and reads only rows whose tx is below the
// xmin of the statement's own snapshot: every transaction below xmin has
// ended, so no row can ever appear before the last one a reader saw. A
// transaction that is still open holds back later commits from $all until
// it ends (TestHorizon in this package, and the suite's CatchUp, check it);
// writers never wait for each other to get there.
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
// The horizon is the whole cluster's: any transaction with an id, in any
// database of the server (a long report, an idle-in-transaction session, a
// forgotten prepared transaction), holds $all back while it runs. Stream
// reads are not affected.
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
// As with any database, a cancel can still lose the race with the commit:
// the append's outcome is then unknown to the caller, and retrying it with
// the same event ids is safe.
//
// # Figures
//
// Measured on this project's 2-core machine against PostgreSQL 15 on
// loopback (synchronous_commit on). Each benchmark alternates varve with
// its baseline in the same loop, so the ratio is what to read; noise on
// this machine moves the absolute rates by up to 2x between runs.
// BenchmarkTargets, against issue 3's baselines (a plain single-row INSERT
// in autocommit into a bare table, CopyFrom of 100 rows), throughput ratio
// varve/base, three runs of `go test -run '^$' -bench Targets -benchtime 2s`:
//
//	append 1 event, 1 client          0.80-0.81x the bare INSERT
//	append 1 event, 8 clients         0.91x the bare INSERT from 8 clients
//	8 clients vs 1                    2.0-2.2x (the bare INSERT: 1.8-1.9x)
//	append 100 events                 0.58-0.60x CopyFrom of 100 rows
//
// BenchmarkAppend, AppendParallel and Read, against plain pgx statements on
// a table with a primary key and a (stream, version) index, time ratio
// varve/base (below 1 is faster), two runs of `-benchtime 2s`:
//
//	append 1 event, 1 writer          1.15x the one-row INSERT
//	append 100 events, 1 writer       1.29-1.32x the unnest INSERT of 100 rows
//	append 1 event, 16 writers        1.04-1.08x 16 writers of single INSERTs
//	$all page of 512                  0.90-0.91x SELECT ... ORDER BY seq + Scan
//	stream page of 100                0.95-0.99x SELECT by (stream, version) + Scan
package postgres
