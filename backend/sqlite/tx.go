package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"github.com/varve-go/varve"
)

// WriteTx runs fn inside a write transaction of the backend's writer, so
// that an application can write its own tables (a read model) in the
// database file of the store and commit them together with varve's own
// writes, such as a checkpoint saved with [AdvanceCheckpoint].
//
// fn runs on the writer goroutine, in a savepoint of one group commit: it
// is serialised with every append, and the group's other writes share its
// transaction and its sync. When fn returns an error, its writes are rolled
// back to the savepoint, WriteTx returns the error and the rest of the
// group commits. When fn returns nil, its writes commit with the group;
// WriteTx returns once they are durable (as Config.Synchronous makes them).
// A storage error in the group rolls the whole transaction back and the
// writer commits the group again: fn may then run more than once, and the
// writes of only one run commit. Keep fn short, since every write of the
// store waits for it.
//
// The statements of tx check ctx before they run and are not interrupted
// once running (an interrupted statement could roll back the whole group).
// fn must not commit or roll back tx, keep it after returning, or call the
// backend's write methods (they wait for the writer, which waits for fn).
// When ctx ends before fn returns, WriteTx returns ctx.Err() and fn's writes
// may still commit, as with an append.
func (b *Backend) WriteTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if fn == nil {
		return fmt.Errorf("sqlite: write transaction: nil func: %w", varve.ErrInvalidArgument)
	}
	return b.submit(&op{ctx: ctx, kind: opTx, txfn: fn})
}

// ReadTx runs fn in a read transaction on a connection of the read pool:
// every statement of tx reads the same snapshot of the database file, such
// as a read model and its checkpoint as of one commit. fn must not write.
func (b *Backend) ReadTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if fn == nil {
		return fmt.Errorf("sqlite: read transaction: nil func: %w", varve.ErrInvalidArgument)
	}
	if b.closed.Load() {
		return varve.ErrClosed
	}
	tx, err := b.txdb.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("sqlite: read transaction: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: read transaction: %w", err)
	}
	return nil
}

const qAdvanceCheckpoint = `INSERT INTO checkpoints (name, commit_id, seq) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET commit_id = excluded.commit_id, seq = excluded.seq
WHERE (checkpoints.commit_id, checkpoints.seq) < (excluded.commit_id, excluded.seq)`

// AdvanceCheckpoint saves checkpoint name at pos in tx, a transaction of
// [Backend.WriteTx], only when that moves it forward; moved is false when
// the checkpoint was already at or past pos. The checkpoint is the one the
// backend's [Backend.LoadCheckpoint] reads.
func AdvanceCheckpoint(ctx context.Context, tx *sql.Tx, name string, pos varve.Position) (moved bool, err error) {
	if err := varve.CheckName(name); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, qAdvanceCheckpoint, name, int64(pos.Commit), int64(pos.Seq))
	if err != nil {
		return false, fmt.Errorf("sqlite: advance checkpoint %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: advance checkpoint %q: %w", name, err)
	}
	return n > 0, nil
}

// CheckpointTx loads checkpoint name in tx, a transaction of
// [Backend.WriteTx] or [Backend.ReadTx]; ok is false when it was never
// saved.
func CheckpointTx(ctx context.Context, tx *sql.Tx, name string) (pos varve.Position, ok bool, err error) {
	var c, q int64
	switch err := tx.QueryRowContext(ctx, qLoadCheckpoint, name).Scan(&c, &q); {
	case errors.Is(err, sql.ErrNoRows):
		return varve.Position{}, false, nil
	case err != nil:
		return varve.Position{}, false, fmt.Errorf("sqlite: load checkpoint %q: %w", name, err)
	}
	return varve.Position{Commit: uint64(c), Seq: uint64(q)}, true, nil
}

// txDB is a database/sql view of the backend's connections. write hands
// out the writer's connection, on which a transaction is a savepoint of the
// group commit in progress; read borrows a connection of the read pool.
type txDB struct {
	write, read *sql.DB
}

func newTxDB(b *Backend) *txDB {
	w := sql.OpenDB(connector{func(context.Context) (driver.Conn, error) {
		return &txConn{raw: b.wconn.raw, savepoint: true, cache: b.wconn}, nil
	}})
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	r := sql.OpenDB(connector{func(ctx context.Context) (driver.Conn, error) {
		c, err := b.reads.get(ctx)
		if err != nil {
			return nil, err
		}
		return &txConn{raw: c.raw, release: func() { b.reads.put(c, false) }}, nil
	}})
	// A read connection goes back to the backend's pool after each
	// transaction, not to database/sql's.
	r.SetMaxIdleConns(0)
	return &txDB{write: w, read: r}
}

func (t *txDB) close() error {
	return errors.Join(t.write.Close(), t.read.Close())
}

// tx runs a WriteTx's fn in a savepoint of the writer's transaction.
func (w *writer) tx(o *op) (error, bool) {
	tx, err := w.b.txdb.write.BeginTx(bg, nil)
	if err != nil {
		return fmt.Errorf("sqlite: write transaction: begin: %w", err), true
	}
	err = callTx(o.txfn, tx)
	if err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			// The transaction itself is gone (SQLite rolled it back on a
			// storage error): the group must start again.
			return fmt.Errorf("sqlite: write transaction: %w (roll back: %w)", err, rerr), true
		}
		return err, false
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: write transaction: %w", err), true
	}
	return nil, false
}

func callTx(fn func(*sql.Tx) error, tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sqlite: write transaction: panic: %v", p)
		}
	}()
	return fn(tx)
}

type connector struct {
	connect func(context.Context) (driver.Conn, error)
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) { return c.connect(ctx) }
func (c connector) Driver() driver.Driver                            { return &drv }

// txConn lends a connection of the backend to database/sql. Its statements
// run with a context that cannot interrupt them: an interrupted statement
// can roll back SQLite's whole transaction, which on the writer's
// connection holds other callers' writes.
type txConn struct {
	raw       driver.Conn
	savepoint bool
	// cache, on the writer's connection, keeps the statements that
	// ExecContext prepares (up to maxTxStmts), as the writer keeps its own:
	// a read model's upsert is parsed once, not once per event.
	cache   *conn
	release func()
	once    sync.Once
}

var (
	_ driver.ConnBeginTx        = (*txConn)(nil)
	_ driver.ConnPrepareContext = (*txConn)(nil)
	_ driver.ExecerContext      = (*txConn)(nil)
	_ driver.QueryerContext     = (*txConn)(nil)
	_ driver.SessionResetter    = (*txConn)(nil)
	_ driver.Validator          = (*txConn)(nil)
)

func (c *txConn) Prepare(q string) (driver.Stmt, error) { return c.PrepareContext(bg, q) }

func (c *txConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := c.raw.(driver.ConnPrepareContext).PrepareContext(bg, q)
	if err != nil {
		return nil, err
	}
	return txStmt{s}, nil
}

func (c *txConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.cache != nil {
		if st, ok := c.cache.stmts[q]; ok || len(c.cache.stmts) < maxTxStmts {
			if !ok {
				var err error
				if st, err = c.cache.prepare(q); err != nil {
					return nil, err
				}
			}
			return st.exec.ExecContext(bg, args)
		}
	}
	return c.raw.(driver.ExecerContext).ExecContext(bg, q, args)
}

// maxTxStmts bounds the statements of WriteTx functions and inline
// projections kept prepared on the writer's connection (with its own).
const maxTxStmts = 256

func (c *txConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.raw.(driver.QueryerContext).QueryContext(bg, q, args)
}

func (c *txConn) Begin() (driver.Tx, error) { return c.BeginTx(bg, driver.TxOptions{}) }

func (c *txConn) BeginTx(ctx context.Context, _ driver.TxOptions) (driver.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	begin, commit, rollback := "BEGIN", []string{"COMMIT"}, []string{"ROLLBACK"}
	if c.savepoint {
		begin, commit, rollback = "SAVEPOINT varve_tx", []string{"RELEASE varve_tx"}, []string{"ROLLBACK TO varve_tx", "RELEASE varve_tx"}
	}
	if err := c.exec(begin); err != nil {
		return nil, err
	}
	return txEnd{c, commit, rollback}, nil
}

func (c *txConn) exec(qs ...string) error {
	for _, q := range qs {
		if _, err := c.raw.(driver.ExecerContext).ExecContext(bg, q, nil); err != nil {
			return err
		}
	}
	return nil
}

// Close gives a borrowed read connection back; the writer's stays open.
func (c *txConn) Close() error {
	if c.release != nil {
		c.once.Do(c.release)
	}
	return nil
}

func (c *txConn) ResetSession(context.Context) error { return nil }
func (c *txConn) IsValid() bool                      { return true }

type txEnd struct {
	c                *txConn
	commit, rollback []string
}

func (t txEnd) Commit() error   { return t.c.exec(t.commit...) }
func (t txEnd) Rollback() error { return t.c.exec(t.rollback...) }

type txStmt struct{ driver.Stmt }

func (s txStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.Stmt.(driver.StmtExecContext).ExecContext(bg, args)
}

func (s txStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.Stmt.(driver.StmtQueryContext).QueryContext(bg, args)
}
