package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/varve-go/varve/internal/migrate"
)

//go:embed migrations/*.sql code/*.sql
var embedded embed.FS

// migrationLock is the advisory lock key that serializes migrations of all
// schemas in a database.
const migrationLock = 0x7661727665 // "varve"

// migrate creates the schema and, in one transaction under an advisory lock
// (processes that start together do not race), applies the embedded
// migrations it lacks and then the code, code/*.sql: functions replaced
// whatever they were, triggers created where missing. A schema newer than
// this package is left as it is, code included, as its code is the newer
// package's: so a change to the code that processes of an older varve must
// not undo when they start comes with a migration (a comment alone will
// do), which moves the schema's version past theirs.
func (b *Backend) migrate(ctx context.Context) error {
	ms, err := migrate.Load(embedded, "migrations")
	if err != nil {
		return fmt.Errorf("postgres: load migrations: %w", err)
	}
	code, err := migrate.LoadCode(embedded, "code")
	if err != nil {
		return fmt.Errorf("postgres: load code: %w", err)
	}
	x := newExpander(b.schema, b.seed)
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate %s: %w", b.schema, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLock)); err != nil {
		return fmt.Errorf("postgres: migrate %s: lock: %w", b.schema, err)
	}
	defer func() {
		// A fresh context: the lock must go even when ctx ended.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrationLock))
	}()
	setup := fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS %[1]s;
CREATE TABLE IF NOT EXISTS %[1]s.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())`, b.schema)
	if _, err := conn.Exec(ctx, setup); err != nil {
		return fmt.Errorf("postgres: migrate %s: create schema: %w", b.schema, err)
	}
	current, err := b.schemaVersion(ctx, conn.Conn())
	if err != nil {
		return err
	}
	pending, err := migrate.Pending(ms, current)
	if err != nil {
		return b.tooOld(err)
	}
	if current > ms[len(ms)-1].Version {
		return nil
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// String literals are read as written, as the expander escaped
		// them, whatever the server's setting.
		if _, err := tx.Exec(ctx, "SET LOCAL standard_conforming_strings = on"); err != nil {
			return err
		}
		for _, m := range pending {
			if err := exec(ctx, tx, x, m.Name, m.SQL); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+b.schema+".schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		for _, c := range code {
			if err := exec(ctx, tx, x, "code/"+c.Name, c.SQL); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: migrate %s: %w", b.schema, err)
	}
	return nil
}

// exec runs the SQL of an embedded file with its placeholders filled.
func exec(ctx context.Context, tx pgx.Tx, x expander, name, sql string) error {
	body, err := x.expand(sql)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if _, err := tx.Exec(ctx, body); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// tooOld explains the error of a schema older than the baseline.
func (b *Backend) tooOld(err error) error {
	return fmt.Errorf("postgres: schema %s: %w: it was made by a development version of varve before its schema history was squashed; drop it and let New create it again", b.schema, err)
}

// schemaVersion returns the version of the schema's last migration, 0 when
// the schema has none.
func (b *Backend) schemaVersion(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var v int64
	err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+b.schema+".schema_migrations").Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("postgres: read the version of schema %s: %w", b.schema, err)
	}
	return v, nil
}

// readVersion returns the schema's version without migrating it: 0 when
// the schema or its migrations table does not exist. A schema older than
// the baseline is refused.
func (b *Backend) readVersion(ctx context.Context) (int64, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Release()
	v, err := b.schemaVersion(ctx, conn.Conn())
	var pg *pgconn.PgError
	if errors.As(err, &pg) && (pg.Code == "42P01" || pg.Code == "3F000") { // undefined table, schema
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	ms, err := migrate.Load(embedded, "migrations")
	if err != nil {
		return 0, fmt.Errorf("postgres: load migrations: %w", err)
	}
	if _, err := migrate.Pending(ms, v); err != nil {
		return 0, b.tooOld(err)
	}
	return v, nil
}

// Drop removes the backend's schema with everything in it. It is meant for
// tests and tools; the backend is unusable afterwards.
func (b *Backend) Drop(ctx context.Context) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	b.requests.Add(1)
	if _, err := b.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+b.schema+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", b.schema, b.fail(ctx, err))
	}
	return nil
}
