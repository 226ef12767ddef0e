package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key that serializes migrations of all
// schemas in a database.
const migrationLock = 0x7661727665 // "varve"

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and _", name)
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate creates the schema and applies the embedded migrations it lacks,
// each in its own transaction, under an advisory lock so that processes
// starting together do not race.
func (b *Backend) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("postgres: load migrations: %w", err)
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate %s: acquire connection: %w", b.schema, err)
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
	var current int
	err = conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+b.schema+".schema_migrations").Scan(&current)
	if err != nil {
		return fmt.Errorf("postgres: migrate %s: read version: %w", b.schema, err)
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		body := strings.NewReplacer("__SCHEMA__", b.schema, "__SEED__", strconv.FormatInt(b.seed, 10)).Replace(m.sql)
		tx, err := conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("postgres: migrate %s to %s: begin: %w", b.schema, m.name, err)
		}
		if _, err := tx.Exec(ctx, body); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("postgres: migrate %s to %s: %w", b.schema, m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+b.schema+".schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("postgres: migrate %s to %s: record: %w", b.schema, m.name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("postgres: migrate %s to %s: commit: %w", b.schema, m.name, err)
		}
	}
	return nil
}

// Drop removes the backend's schema with everything in it. It is meant for
// tests and tools; the backend is unusable afterwards.
func (b *Backend) Drop(ctx context.Context) error {
	if err := b.begin(ctx); err != nil {
		return fmt.Errorf("postgres: drop schema %s: %w", b.schema, err)
	}
	if _, err := b.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+b.schema+" CASCADE"); err != nil {
		return b.fail(ctx, "drop schema "+b.schema, err)
	}
	return nil
}
