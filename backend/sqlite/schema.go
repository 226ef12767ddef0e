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

//go:embed migrations/*.sql code/*.sql
var embedded embed.FS

// applicationID marks a SQLite file as a varve database ('varv').
const applicationID = 0x76617276

func migrations() ([]migrate.Migration, error) {
	return migrate.Load(embedded, "migrations")
}

// codeObject is a trigger or view of code/, named by its file: the
// statement that creates it, as sqlite_schema keeps it (from CREATE to its
// end, without the semicolon).
type codeObject struct {
	kind, name, sql string
}

// loadCode returns the objects of code/. Each file holds one CREATE
// TRIGGER or CREATE VIEW of the object its file is named for, after
// comment lines.
func loadCode() ([]codeObject, error) {
	cs, err := migrate.LoadCode(embedded, "code")
	if err != nil {
		return nil, err
	}
	objs := make([]codeObject, 0, len(cs))
	for _, c := range cs {
		o := codeObject{name: strings.TrimSuffix(c.Name, ".sql")}
		lines := strings.Split(c.SQL, "\n")
		for len(lines) > 0 && (strings.HasPrefix(lines[0], "--") || strings.TrimSpace(lines[0]) == "") {
			lines = lines[1:]
		}
		o.sql = strings.TrimRight(strings.TrimSpace(strings.Join(lines, "\n")), ";")
		for _, kind := range []string{"trigger", "view"} {
			if strings.HasPrefix(o.sql, "CREATE "+strings.ToUpper(kind)+" "+o.name+" ") {
				o.kind = kind
			}
		}
		if o.kind == "" {
			return nil, fmt.Errorf("code/%s: want one CREATE TRIGGER or CREATE VIEW %s", c.Name, o.name)
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// staleCode returns the objects of code that the database lacks or keeps
// with another statement.
func staleCode(ctx context.Context, c *conn, code []codeObject) ([]codeObject, error) {
	var stale []codeObject
	for _, o := range code {
		var have string
		ok, err := c.queryRow(ctx, "SELECT sql FROM sqlite_schema WHERE type = ? AND name = ?",
			func(v []driver.Value) { have = asString(v[0]) }, o.kind, o.name)
		if err != nil {
			return nil, fmt.Errorf("read the %s %s: %w", o.kind, o.name, err)
		}
		if !ok || have != o.sql {
			stale = append(stale, o)
		}
	}
	return stale, nil
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
	// A new database gives the pages that deletions free back to the file
	// system when asked (Backend.ReclaimSpace). SQLite takes the mode only
	// before the first table and before WAL mode; an existing file keeps
	// the mode it has.
	var objects int64
	if _, err := c.queryRow(ctx, "SELECT count(*) FROM sqlite_schema", func(v []driver.Value) { objects = asInt(v[0]) }); err != nil {
		return fmt.Errorf("count the schema objects: %w", err)
	}
	if objects == 0 {
		if _, err := c.exec(ctx, "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
			return fmt.Errorf("set auto_vacuum: %w", err)
		}
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

// upgrade brings the schema up to date: the migrations it lacks, then the
// code (code/*.sql) where the file keeps another version of it or none,
// in one transaction. It refuses a SQLite file of another application, a
// schema newer than this code and one older than the baseline. A file
// already up to date is not written.
func upgrade(ctx context.Context, c *conn) (err error) {
	ms, err := migrations()
	if err != nil {
		return err
	}
	code, err := loadCode()
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version
	// What the file lacks, read first without the write lock, which a busy
	// writer of another process may hold for longer than the busy timeout.
	todo := func() ([]migrate.Migration, []codeObject, error) {
		version, err := checkIdentity(ctx, c, latest)
		if err != nil {
			return nil, nil, err
		}
		pending, err := migrate.Pending(ms, version)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: the file was made by a development version of varve before its schema history was squashed; make a new one", err)
		}
		stale, err := staleCode(ctx, c, code)
		return pending, stale, err
	}
	if pending, stale, err := todo(); err != nil || len(pending) == 0 && len(stale) == 0 {
		return err
	}
	if _, err := c.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = c.exec(ctx, "ROLLBACK")
		}
	}()
	pending, stale, err := todo()
	if err != nil {
		return err
	}
	for _, m := range pending {
		if _, err := c.exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := c.exec(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
			return fmt.Errorf("migration %s: set user_version: %w", m.Name, err)
		}
	}
	for _, o := range stale {
		if _, err := c.exec(ctx, fmt.Sprintf("DROP %s IF EXISTS %s", strings.ToUpper(o.kind), o.name)); err != nil {
			return fmt.Errorf("code %s: %w", o.name, err)
		}
		if _, err := c.exec(ctx, o.sql); err != nil {
			return fmt.Errorf("code %s: %w", o.name, err)
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
