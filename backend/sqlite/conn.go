package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net/url"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// conn is one SQLite connection used through the database/sql/driver
// interfaces directly: statements are prepared once per connection and kept,
// rows are read without database/sql's second copy of every value, and no
// pool lock is taken per call. A conn is used by one goroutine at a time.
type conn struct {
	raw   driver.Conn
	stmts map[string]*stmt
	dest  []driver.Value
}

type stmt struct {
	exec  driver.StmtExecContext
	query driver.StmtQueryContext
	close func() error
	args  []driver.NamedValue
}

var drv msqlite.Driver

// openConn opens path (an absolute file path or Memory) with SQLite URI
// parameters params, such as mode=ro.
func openConn(path, params string) (*conn, error) {
	name := path
	if path != Memory {
		u := url.URL{Scheme: "file", Path: path, RawQuery: params}
		name = u.String()
	}
	raw, err := drv.Open(name)
	if err != nil {
		return nil, err
	}
	return &conn{raw: raw, stmts: map[string]*stmt{}, dest: make([]driver.Value, 16)}, nil
}

func (c *conn) close() error {
	var errs []error
	for _, s := range c.stmts {
		errs = append(errs, s.close())
	}
	clear(c.stmts)
	errs = append(errs, c.raw.Close())
	return errors.Join(errs...)
}

func (c *conn) prepare(q string) (*stmt, error) {
	if s, ok := c.stmts[q]; ok {
		return s, nil
	}
	ds, err := c.raw.(driver.ConnPrepareContext).PrepareContext(context.Background(), q)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", q, err)
	}
	s := &stmt{
		exec:  ds.(driver.StmtExecContext),
		query: ds.(driver.StmtQueryContext),
		close: ds.Close,
	}
	c.stmts[q] = s
	return s, nil
}

func (s *stmt) bind(args []driver.Value) []driver.NamedValue {
	s.args = s.args[:0]
	for i, a := range args {
		s.args = append(s.args, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	return s.args
}

// exec runs a statement that returns no rows. The writer passes
// context.Background(): a statement of a group commit is never interrupted
// on behalf of one caller.
func (c *conn) exec(ctx context.Context, q string, args ...driver.Value) (driver.Result, error) {
	s, err := c.prepare(q)
	if err != nil {
		return nil, err
	}
	res, err := s.exec.ExecContext(ctx, s.bind(args))
	clear(s.args)
	return res, err
}

// query runs a statement and calls row for each result row; the values are
// valid only during the call. row may return errStop to end early.
func (c *conn) query(ctx context.Context, q string, row func([]driver.Value) error, args ...driver.Value) error {
	s, err := c.prepare(q)
	if err != nil {
		return err
	}
	rows, err := s.query.QueryContext(ctx, s.bind(args))
	clear(s.args)
	if err != nil {
		return err
	}
	dest := c.dest[:len(rows.Columns())]
	for {
		if err = rows.Next(dest); err != nil {
			break
		}
		if err = row(dest); err != nil {
			break
		}
	}
	clear(dest)
	if errors.Is(err, io.EOF) || errors.Is(err, errStop) {
		err = nil
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// queryRow runs a statement and scans its first row; ok is false without
// rows.
func (c *conn) queryRow(ctx context.Context, q string, scan func([]driver.Value), args ...driver.Value) (ok bool, err error) {
	err = c.query(ctx, q, func(v []driver.Value) error {
		scan(v)
		ok = true
		return errStop
	}, args...)
	return ok, err
}

var errStop = errors.New("stop")

// code returns the primary SQLite result code of err, or 0.
func code(err error) int {
	var e *msqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

func isUniqueViolation(err error) bool {
	var e *msqlite.Error
	return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}

func asInt(v driver.Value) int64 {
	i, _ := v.(int64)
	return i
}

func asString(v driver.Value) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return ""
}

func asBytes(v driver.Value) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return nil
}
