package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/varve-go/varve"
)

// closingHandler ends a statement whose context a closing Store ended
// (cause varve.ErrClosed) at once, breaking its connection, which Close
// drops anyway; any other cancellation sends PostgreSQL a cancel request,
// marks the connection (cancelSent) and closes it when the statement ends,
// so that the pool drops it as it is released: the server acts on a
// cancel request whenever the process that reads it runs, and on a busy
// machine that came after pgx's 100 ms wait, cancelling the connection's
// next statement, a read with a live context ("canceling statement due to
// user request"). One handler serves one connection, which runs one
// statement at a time.
type closingHandler struct {
	*pgconn.CancelRequestContextWatcherHandler
	conn   *pgconn.PgConn
	broken bool // the last cancel broke the connection
}

func (h *closingHandler) HandleCancel(ctx context.Context) {
	if h.broken = errors.Is(context.Cause(ctx), varve.ErrClosed); h.broken {
		_ = h.conn.Conn().SetDeadline(time.Now())
		return
	}
	h.conn.CustomData()[cancelSent] = true
	h.CancelRequestContextWatcherHandler.HandleCancel(ctx)
}

func (h *closingHandler) HandleUnwatchAfterCancel() {
	if h.broken {
		_ = h.conn.Conn().SetDeadline(time.Time{})
		return
	}
	h.CancelRequestContextWatcherHandler.HandleUnwatchAfterCancel()
	// Closed now, the connection is dropped as it is released: left idle
	// for keepConn, a run of them could use up pgxpool's attempts to
	// acquire one ("too many failed attempts") and fail a live call.
	_ = h.conn.Close(context.Background())
}

// cancelSent marks, in a connection's custom data, a connection to which
// a cancel request may have been sent.
const cancelSent = "varve.cancel_sent"

// keepConn is the pool's PrepareConn, a second guard behind closingHandler
// (which closes such a connection as its statement ends): a connection
// that may still get a cancel request meant for an earlier statement is
// closed, not reused, and the call goes on with another.
func keepConn(_ context.Context, c *pgx.Conn) (bool, error) {
	return c.PgConn().CustomData()[cancelSent] == nil, nil
}

// cancelGrace is how long a cancelled statement may take to stop after the
// cancel request before its connection is closed.
const cancelGrace = time.Second

// Backend is a varve.Backend on PostgreSQL. It is safe for concurrent use.
type Backend struct {
	cfg     Config
	pool    *pgxpool.Pool
	schema  string // quoted identifier
	seed    int64  // advisory lock key seed of the schema
	standby bool   // the server was a hot standby when New connected
	sql     queries

	requests atomic.Uint64
	closed   atomic.Bool
	floor    *floor // of $all reads

	life   context.Context // ends at Close: stops the goroutines below
	cancel context.CancelFunc
	wg     sync.WaitGroup // the notifier and the listener

	notify chan struct{} // capacity 1: an append asks for a NOTIFY
	watch  watchState
}

var (
	_ varve.Backend         = (*Backend)(nil)
	_ varve.SnapshotStore   = (*Backend)(nil)
	_ varve.CheckpointStore = (*Backend)(nil)
	_ varve.Watcher         = (*Backend)(nil)
)

// New connects to PostgreSQL, creates or upgrades the schema unless
// cfg.NoMigrate or the server is a hot standby (see "Reading from a hot
// standby" in the package doc), and returns the backend. Close it to
// release the pool.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("postgres: connection string: %s: %w", parseProblem(err), varve.ErrInvalidArgument)
	}
	switch {
	case cfg.ConnectTimeout < 0:
		pc.ConnConfig.ConnectTimeout = 0
	case cfg.ConnectTimeout > 0:
		pc.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	case pc.ConnConfig.ConnectTimeout == 0:
		pc.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	switch {
	case cfg.MaxConns > 0:
		pc.MaxConns = cfg.MaxConns
	case !strings.Contains(cfg.ConnString, "pool_max_conns"):
		pc.MaxConns = max(pc.MaxConns, DefaultMaxConns)
	}
	// Reads decode rows in PostgreSQL's binary format, which the modes that
	// describe statements use.
	switch pc.ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	}
	// Every statement must take its own snapshot: the conditional appends
	// check their condition in a statement after the one that takes their
	// locks, and the fast append compares a row with the one its statement
	// read. A server or URL whose default isolation is repeatable read or
	// serializable would give the whole transaction the first statement's
	// snapshot.
	pc.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	// The backend's statements are short, and bounded by their limits, but
	// the planner can estimate some (query and filtered reads: a range scan
	// per value of an array parameter) above jit_above_cost on a large
	// store, and a cached plan with JIT compiles again at every execution:
	// with its generic plan, a query read of a store of a million events
	// took 9.1 ms with JIT and 0.2 ms without. JIT stays off unless the
	// connection string sets it.
	if _, ok := pc.ConnConfig.RuntimeParams["jit"]; !ok {
		pc.ConnConfig.RuntimeParams["jit"] = "off"
	}
	// A cancelled call sends PostgreSQL a cancel request, so that an append
	// waiting for its stream's lock is aborted rather than written once the
	// lock comes free; the connection is dropped if that takes too long.
	pc.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &closingHandler{CancelRequestContextWatcherHandler: &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace}, conn: c}
	}
	pc.PrepareConn = keepConn
	// Each new connection reports its server's incarnation: a floor holds
	// only on the server that proved it (floor.go).
	fl := new(floor)
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		var inc int64
		if err := c.QueryRow(ctx, `SELECT `+serverIncarnation).Scan(&inc); err != nil {
			return err
		}
		fl.server(inc)
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", err)
	}
	b := &Backend{
		cfg:    cfg,
		pool:   pool,
		schema: pgx.Identifier{cfg.Schema}.Sanitize(),
		seed:   seedOf(cfg.Schema),
		notify: make(chan struct{}, 1),
		floor:  fl,
	}
	b.life, b.cancel = context.WithCancel(context.Background())
	if err = pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&b.standby); err != nil {
		err = fmt.Errorf("postgres: %w", err)
	}
	switch {
	case err != nil:
	case cfg.NoMigrate:
		_, err = b.readVersion(ctx)
	case b.standby:
		// A standby takes the primary's migrations with its WAL.
		var v int64
		if v, err = b.readVersion(ctx); err == nil && v == 0 {
			err = fmt.Errorf("schema %s does not exist on the standby (New migrates only a primary): %w", b.schema, ErrStandby)
		}
	default:
		err = b.migrate(ctx)
	}
	if err != nil {
		b.cancel()
		pool.Close()
		return nil, err
	}
	b.sql = newQueries(b.schema, writersHorizon(b.schema))
	b.sql.taggedLocks, b.sql.taggedAppend = taggedStatements(newExpander(b.schema, b.seed))
	if !cfg.NoNotify {
		b.wg.Add(1)
		go b.notifier()
	}
	return b, nil
}

// seedOf returns the seed of the advisory lock keys of the named schema.
func seedOf(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return int64(h.Sum64() >> 1)
}

// Features declares what the backend provides.
func (b *Backend) Features() varve.Features {
	return varve.Features{
		Name:           "postgres",
		Durable:        true,
		UniqueEventIDs: true,
	}
}

// Requests returns the number of statements sent to the server so far,
// NOTIFYs included.
func (b *Backend) Requests() uint64 { return b.requests.Load() }

// Pool returns the backend's connection pool, for tools that inspect the
// schema; writing varve's tables through it bypasses every guarantee.
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// Schema returns the quoted name of the backend's schema.
func (b *Backend) Schema() string { return b.schema }

// Close stops the backend's goroutines and closes its pool, waiting for
// statements in flight. It is idempotent.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.cancel()
	b.watch.mu.Lock()
	b.watch.stopped = true // from here on the wait group is complete
	b.watch.mu.Unlock()
	b.wg.Wait()
	b.watch.signal.Close()
	b.pool.Close()
	return nil
}

// begin checks that an operation may start.
func (b *Backend) begin(ctx context.Context) error {
	if b.closed.Load() {
		return varve.ErrClosed
	}
	return ctx.Err()
}
