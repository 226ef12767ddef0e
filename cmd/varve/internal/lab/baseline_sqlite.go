package lab

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/workload"
)

// sqliteBaseline inserts one row per transaction into a bare table of a
// throwaway database file next to the store's file (same disk), in WAL mode
// with synchronous=FULL, through modernc.org/sqlite on one connection.
func sqliteBaseline(ctx context.Context, raw string) (*baseline, error) {
	path, err := sqlitePath(raw)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "varve-baseline-*.db")
	if err != nil {
		return nil, fmt.Errorf("sqlite baseline: create database file: %w", err)
	}
	file := f.Name()
	_ = f.Close()
	remove := func() {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			_ = os.Remove(file + suffix)
		}
	}
	db, err := sql.Open("sqlite", file+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)")
	if err != nil {
		remove()
		return nil, fmt.Errorf("sqlite baseline: open %s: %w", file, err)
	}
	db.SetMaxOpenConns(1)
	fail := func(what string, err error) (*baseline, error) {
		_ = db.Close()
		remove()
		return nil, fmt.Errorf("sqlite baseline: %s: %w", what, err)
	}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version); err != nil {
		return fail("read version", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE events (
		pos INTEGER PRIMARY KEY, id BLOB NOT NULL, type TEXT NOT NULL, data BLOB NOT NULL)`); err != nil {
		return fail("create table", err)
	}
	ins, err := db.PrepareContext(ctx, "INSERT INTO events (id, type, data) VALUES (?, ?, ?)")
	if err != nil {
		return fail("prepare insert", err)
	}
	return &baseline{
		name:    "bare INSERT",
		about:   "one INSERT per transaction into a bare table, WAL, synchronous=FULL (modernc.org/sqlite, 1 connection)",
		version: "SQLite " + version,
		newOp: func(int) workload.Op {
			return func(ctx context.Context) (int, error) {
				id := varve.NewEventID()
				if _, err := ins.ExecContext(ctx, id[:], "OrderPlaced", workload.Payload); err != nil {
					return 0, fmt.Errorf("sqlite baseline: insert: %w", err)
				}
				return 1, nil
			}
		},
		close: func(context.Context) error {
			err := errors.Join(ins.Close(), db.Close())
			remove()
			return err
		},
	}, nil
}

// sqlitePath returns the file of a sqlite:///path/file.db or sqlite:file.db
// URL.
func sqlitePath(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("sqlite baseline: parse %q: %w", raw, err)
	}
	path := u.Path
	if u.Opaque != "" {
		path = u.Opaque
	}
	if u.Host != "" && u.Host != "localhost" {
		path = u.Host + path // sqlite://relative/file.db
	}
	if path == "" {
		return "", fmt.Errorf("sqlite baseline: %q names no file: %w", raw, varve.ErrInvalidArgument)
	}
	return path, nil
}
