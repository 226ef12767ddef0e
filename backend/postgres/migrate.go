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

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key that serializes migrations of all
// schemas in a database.
const migrationLock = 0x7661727665 // "varve"

// migrate creates the schema and applies the embedded migrations it lacks,
// each in its own transaction, under an advisory lock so that processes
// starting together do not race. It returns the schema's version.
func (b *Backend) migrate(ctx context.Context) (int64, error) {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return 0, fmt.Errorf("postgres: load migrations: %w", err)
	}
	x := newExpander(b.schema, b.seed)
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("postgres: migrate %s: %w", b.schema, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLock)); err != nil {
		return 0, fmt.Errorf("postgres: migrate %s: lock: %w", b.schema, err)
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
		return 0, fmt.Errorf("postgres: migrate %s: create schema: %w", b.schema, err)
	}
	current, err := b.schemaVersion(ctx, conn.Conn())
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		body, err := x.expand(m.SQL)
		if err != nil {
			return 0, fmt.Errorf("postgres: migration %s: %w", m.Name, err)
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// String literals of the migrations are read as written, as
			// the expander escaped them, whatever the server's setting.
			if _, err := tx.Exec(ctx, "SET LOCAL standard_conforming_strings = on"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, body); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+b.schema+".schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("postgres: migrate %s to %s: %w", b.schema, m.Name, err)
		}
		current = m.Version
	}
	return current, nil
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
// the schema or its migrations table does not exist.
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
	return v, err
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
