// Package postgres is the PostgreSQL backend of varve: an event store in one
// schema of a PostgreSQL (13 or later) database, reached through a pgx v5
// connection pool. This is the contract; how it is done, the proofs, and
// measured figures are in docs/backends/postgres.md.
//
//	cfg, err := postgres.ParseURL("postgres://user@127.0.0.1/db?varve_schema=orders")
//	b, err := postgres.New(ctx, cfg)
//	store, err := varve.New(b, varve.Config{})
//
// # Configuration
//
// [ParseURL] reads varve_schema, varve_max_conns, varve_no_migrate,
// varve_no_notify, varve_notify_interval and varve_watch_poll into a [Config]
// and passes the rest of the URL to pgx; an unknown varve_* parameter, a
// parameter given twice or a malformed query string is
// varve.ErrInvalidArgument, and no error of this package shows a password.
// Connections run in read committed whatever the connection string or the
// server says, and without JIT unless the connection string sets jit.
// Connecting is bounded by Config.ConnectTimeout, or the connection string's
// connect_timeout, or DefaultConnectTimeout (10s).
//
// New creates the schema (default "varve") or brings it up to date, in one
// transaction under an advisory lock, so processes that start together do not
// race: the embedded migrations it lacks, the first of which (version 13, the
// baseline) creates the whole schema, then its functions, replaced at every
// start, and its triggers, created where missing. A schema newer than the
// package keeps the functions of the newer varve. A schema that a development
// version made before the history was squashed into the baseline (version 1 to
// 12) is refused, Config.NoMigrate or not: drop it. Config.NoMigrate leaves
// the rest to the operator. Any schema name PostgreSQL
// allows works as given, up to 63 bytes; refused with
// varve.ErrInvalidArgument: NUL, invalid UTF-8, names over 63 bytes, names
// PostgreSQL reserves (pg_*, information_schema) and public. Separate schemas
// are separate stores.
//
// # Appends
//
// An append is atomic and costs one round trip ([Backend.Requests] counts
// them) unless it conflicts, is a retry, races another writer of its stream or
// runs an inline projection. Appends to different streams never wait for each
// other and share PostgreSQL's group commit; appends to one stream are ordered
// by a compare-and-set on the stream's row, and a writer that loses the race
// runs again. An append whose first event id is stored in the stream is a
// retry, which returns the original result if its ids are the stored events'
// from that one on, one for one, and fails with varve.ErrDuplicateEvent
// otherwise; any other stored id fails the append with ErrDuplicateEvent
// (Features.UniqueEventIDs). A wrong expected version is a
// [varve.WrongExpectedVersionError]; a tombstoned stream gives
// varve.ErrStreamDeleted. An append is acknowledged once its transaction has
// committed: it is as durable as the server makes a commit
// (synchronous_commit, fsync, replication).
//
// Delete and Truncate wait for an append in flight on the stream; deleted and
// truncated events leave $all and their positions are not reused.
//
// # $all: positions and consistency
//
// [varve.Position] is (Commit: the appending transaction's id, Seq: the
// event's sequence number); $all is ordered by it. $all is gap-free: a reader
// that resumes after the last event of a page misses no committed event and
// never sees a rolled-back one, and each stream's events appear in version
// order. To give that, $all is held back by this schema's writers only: an
// append in flight for its own duration, an open writer for as long as it is
// open. Transactions that write no events (another schema's or database's, an
// idle session, a prepared transaction) do not hold it back, except on a
// standby, where $all waits for every transaction with an id. Events must be written by this
// package only: an event inserted by hand in a transaction that had an id
// before it took the schema's writer lock breaks the guarantee. Stream reads
// have no horizon.
//
// A stream read is one statement and tells a missing, deleted or tombstoned
// stream from an empty page.
//
// # Capabilities
//
// Snapshots, checkpoints, stream and checkpoint listings, filtered reads of
// $all (varve.Filter, by index), appends to several streams
// (varve.MultiAppender), tags and conditional appends (varve.TagStore),
// position numbers (varve.PositionNumbers), leases ([varve.LeaseStore]), the
// keys of crypto-shredding ([varve.KeyStore]) and,
// with Config.Inline, inline projections run in the append's transaction
// ([InlineFunc]). Snapshots kept in commits (varve.CommitSnapshotStore) are
// not supported.
//
// An event's number (varve.PositionNumbers) is built from its transaction
// id and its place in the transaction; docs/backends/postgres.md says how,
// and which positions have none (varve.ErrInvalidArgument).
//
// Leases judge expiry by the server's clock. A fenced checkpoint save with a
// token older than the lease's is refused with varve.ErrLeaseLost; an Acquire
// that hands out a new token waits for a fenced save in flight to commit, so
// the new holder reads it.
//
// Keys are rows of the schema's table keys, each in one statement (PutKey:
// an insert that does nothing when the subject has a key, and a read of the
// subject's key); the data key is stored only wrapped. PostgreSQL cannot
// overwrite a row in place: the bytes of a deleted key (and those a rewrap
// replaced) stay in the table's dead row until VACUUM prunes it, then in
// the free space of its page until a new row reuses it or the table is
// rewritten (VACUUM FULL), and in the WAL until its segment is removed, or
// recycled and overwritten, after a checkpoint; archived WAL, replicas and
// backups keep what they received. To have them leave the data directory:
// VACUUM FULL the keys table, CHECKPOINT, then, with wal_recycle=off,
// pg_switch_wal() and CHECKPOINT again.
//
// # Watch
//
// [Backend.Watch] wakes this process's watchers at each of its commits, and
// other processes' through LISTEN/NOTIFY: one NOTIFY per burst of commits, at
// most one per Config.NotifyInterval (Config.NoNotify turns it off). It also
// wakes watchers every Config.WatchPoll, which covers commits held back behind
// an older transaction.
//
// # Reading from a hot standby
//
// A store can be opened on a streaming replica: New sees pg_is_in_recovery()
// and does not migrate (a schema the standby does not have yet fails New with
// [ErrStandby]: open the primary first). Reads work as on the primary; every
// write (append, delete, truncate, snapshot or checkpoint save) fails with
// [ErrStandby], wrapping the server's read-only error (SQLSTATE 25006). A
// subscription on a standby keeps its checkpoints elsewhere
// (subscription.Config's Checkpoints can be the primary's backend). A backend
// opened on a standby stays a standby's: after a promotion, open it again.
// $all on a standby is gap-free but waits for every transaction with an id
// open on the primary, in any database. Its watchers are woken every
// Config.WatchPoll only (a standby cannot LISTEN). [Backend.StandbyStatus]
// reports the WAL received and replayed and the time since the last replayed
// commit.
//
// # Errors
//
// The Store names the operation and the stream, so this package returns the
// sentinels and conflicts bare and adds "postgres:" only before words of its
// own, the server's (with the SQLSTATE) or the driver's. What the server
// refuses in a request's bytes or sizes is varve.ErrInvalidArgument with the
// server's words: text not valid in the database's encoding (SQLSTATE 22021,
// 22P05), a value over one of its limits (class 54, such as an index row over
// 2704 bytes), a message over the protocol's 1 GiB.
//
// # Concurrency
//
// A Backend is safe for concurrent use. It owns at most two goroutines, the
// notifier (unless Config.NoNotify) and the listener (after the first Watch);
// Close stops both and closes the pool, and is idempotent. Every call checks
// for Close and for its context first and returns varve.ErrClosed or the
// context's error. A context that ends while a statement runs cancels the
// statement, so an append that waits for its stream's row is aborted, not
// written later; the connection is then closed, never reused. A cancel can
// still lose the race with the commit: the append's outcome is then unknown,
// and retrying it with the same event ids is safe.
package postgres
