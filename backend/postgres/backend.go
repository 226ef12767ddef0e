package postgres

import (
	"context"
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

// cancelGrace is how long a cancelled statement may take to stop after the
// cancel request before its connection is closed.
const cancelGrace = time.Second

// Backend is a varve.Backend on PostgreSQL. It is safe for concurrent use.
type Backend struct {
	cfg    Config
	pool   *pgxpool.Pool
	schema string // quoted identifier
	seed   int64  // advisory lock key seed of the schema
	sql    queries

	requests atomic.Uint64
	closed   atomic.Bool

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
	_ varve.RequestCounter  = (*Backend)(nil)
)

// New connects to PostgreSQL, creates or upgrades the schema unless
// cfg.NoMigrate, and returns the backend. Close it to release the pool.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse connection string: %w: %v", varve.ErrInvalidArgument, err)
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
	// A cancelled call sends PostgreSQL a cancel request, so that an append
	// waiting for its stream's lock is aborted rather than written once the
	// lock comes free; the connection is dropped if that takes too long.
	pc.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte(cfg.Schema))
	b := &Backend{
		cfg:    cfg,
		pool:   pool,
		schema: pgx.Identifier{cfg.Schema}.Sanitize(),
		seed:   int64(h.Sum64() >> 1),
		notify: make(chan struct{}, 1),
	}
	b.life, b.cancel = context.WithCancel(context.Background())
	b.sql = newQueries(b.schema)
	if !cfg.NoMigrate {
		if err := b.migrate(ctx); err != nil {
			b.cancel()
			pool.Close()
			return nil, err
		}
	}
	if !cfg.NoNotify {
		b.wg.Add(1)
		go b.notifier()
	}
	return b, nil
}

// Features declares what the backend provides.
func (b *Backend) Features() varve.Features {
	return varve.Features{
		Name:           "postgres",
		Durable:        true,
		UniqueEventIDs: true,
		Snapshots:      true,
		Checkpoints:    true,
		Watch:          true,
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
	b.watch.mu.Lock() // a Watch that started the listener did so before this
	b.watch.mu.Unlock()
	b.wg.Wait()
	b.watch.wake()
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

// fail turns an error of a statement into what the seam promises: the
// context's error when it ended, ErrClosed after Close.
func (b *Backend) fail(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("postgres: %s: %w", what, cerr)
	}
	if b.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", what, varve.ErrClosed)
	}
	return fmt.Errorf("postgres: %s: %w", what, err)
}
