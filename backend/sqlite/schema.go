package sqlite

import (
	"context"
	"database/sql/driver"
	"embed"
	"fmt"
	"strings"
	"time"

	"github.com/varve-go/varve/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// applicationID marks a SQLite file as a varve database ('varv').
const applicationID = 0x76617276

func migrations() ([]migrate.Migration, error) {
	return migrate.Load(migrationFiles, "migrations")
}

// configure checks that the file is empty or a varve database, then sets
// the pragmas of the writer connection. Nothing is written to a file that
// fails the check.
func configure(ctx context.Context, c *conn, cfg Config, memory bool) error {
	if _, err := c.exec(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", cfg.BusyTimeout.Milliseconds())); err != nil {
		return fmt.Errorf("set busy_timeout: %w", err)
	}
	ms, err := migrations()
	if err != nil {
		return err
	}
	if _, err := checkIdentity(ctx, c, ms[len(ms)-1].Version); err != nil {
		return err
	}
	if !memory {
		var mode string
		if _, err := c.queryRow(ctx, "PRAGMA journal_mode = WAL", func(v []driver.Value) { mode = asString(v[0]) }); err != nil {
			return fmt.Errorf("set journal_mode=WAL: %w", err)
		}
		if !strings.EqualFold(mode, "wal") {
			return fmt.Errorf("set journal_mode=WAL: SQLite kept journal_mode=%s", mode)
		}
	}
	pragmas := []string{
		"PRAGMA synchronous = " + cfg.Synchronous.pragma(),
		"PRAGMA foreign_keys = ON",
	}
	for _, p := range pragmas {
		if _, err := c.exec(ctx, p); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	if cfg.MaxSize > 0 {
		var pageSize int64
		if _, err := c.queryRow(ctx, "PRAGMA page_size", func(v []driver.Value) { pageSize = asInt(v[0]) }); err != nil {
			return fmt.Errorf("read page_size: %w", err)
		}
		pages := max(cfg.MaxSize/max(pageSize, 1), 1)
		if _, err := c.exec(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
			return fmt.Errorf("set max_page_count: %w", err)
		}
	}
	return nil
}

// checkIdentity returns the schema version of a varve database, 0 for an
// empty file. It refuses a SQLite file of another application and a schema
// newer than latest, and writes nothing.
func checkIdentity(ctx context.Context, c *conn, latest int64) (version int64, err error) {
	var appID, objects int64
	for _, p := range []struct {
		q   string
		dst *int64
	}{
		{"PRAGMA application_id", &appID},
		{"PRAGMA user_version", &version},
		{"SELECT count(*) FROM sqlite_schema", &objects},
	} {
		if _, err := c.queryRow(ctx, p.q, func(v []driver.Value) { *p.dst = asInt(v[0]) }); err != nil {
			return 0, fmt.Errorf("%s: %w", p.q, err)
		}
	}
	switch {
	case appID != 0 && appID != applicationID:
		return 0, fmt.Errorf("the file is the SQLite database of another application (application_id %#x); it was left untouched", appID)
	case appID == 0 && objects > 0:
		return 0, fmt.Errorf("the file is a SQLite database with %d schema objects but not a varve database; it was left untouched", objects)
	case version > latest:
		return 0, fmt.Errorf("the database has schema version %d, newer than this code's %d", version, latest)
	}
	return version, nil
}

// upgrade brings the schema up to date. It refuses a SQLite file of another
// application and a schema newer than this code.
func upgrade(ctx context.Context, c *conn) (err error) {
	ms, err := migrations()
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version
	// A file already up to date needs no write lock, which a busy writer of
	// another process may hold for longer than the busy timeout.
	if version, err := checkIdentity(ctx, c, latest); err != nil {
		return err
	} else if version == latest {
		return nil
	}
	if _, err := c.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = c.exec(ctx, "ROLLBACK")
		}
	}()
	version, err := checkIdentity(ctx, c, latest)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Version <= version {
			continue
		}
		if _, err := c.exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := c.exec(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
			return fmt.Errorf("migration %s: set user_version: %w", m.Name, err)
		}
	}
	if _, err := c.exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// quickCheck runs PRAGMA quick_check and reports the first problems found.
func quickCheck(ctx context.Context, c *conn) error {
	var problems []string
	err := c.query(ctx, "PRAGMA quick_check(10)", func(v []driver.Value) error {
		if s := asString(v[0]); s != "ok" {
			problems = append(problems, s)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("quick_check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("quick_check found a damaged database: %s", strings.Join(problems, "; "))
	}
	return nil
}

func nanos(t time.Time) driver.Value {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func fromNanos(v driver.Value) time.Time {
	n, ok := v.(int64)
	if !ok {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
