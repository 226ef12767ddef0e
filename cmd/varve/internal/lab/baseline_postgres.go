package lab

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/internal/workload"
)

// postgresBaseline inserts one row per statement (autocommit: one
// transaction each) into a bare table of a throwaway schema, through one pgx
// connection; the schema is dropped when the baseline closes.
func postgresBaseline(ctx context.Context, raw string) (*baseline, error) {
	cfg, err := postgres.ParseURL(raw) // drops the varve_* parameters pgx does not know
	if err != nil {
		return nil, fmt.Errorf("postgres baseline: %w", err)
	}
	conn, err := pgx.Connect(ctx, cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("postgres baseline: connect to %s: %w", Redact(raw), err)
	}
	schema := throwawayName("varve_baseline_")
	fail := func(what string, err error) (*baseline, error) {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("postgres baseline: %s: %w", what, err)
	}
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return fail("read version", err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fail("create schema", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE "+schema+`.events (
		pos bigserial PRIMARY KEY, id uuid NOT NULL, type text NOT NULL, data bytea NOT NULL)`); err != nil {
		return fail("create table", err)
	}
	insert := "INSERT INTO " + schema + ".events (id, type, data) VALUES ($1, $2, $3)"
	return &baseline{
		name:    "bare INSERT",
		about:   "one single-row INSERT per transaction into a bare table (pgx, 1 connection)",
		version: "PostgreSQL " + version,
		newOp: func(int) workload.Op {
			return func(ctx context.Context) (int, error) {
				if _, err := conn.Exec(ctx, insert, [16]byte(varve.NewEventID()), "OrderPlaced", workload.Payload); err != nil {
					return 0, fmt.Errorf("postgres baseline: insert: %w", err)
				}
				return 1, nil
			}
		},
		close: func(ctx context.Context) error {
			_, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			if cerr := conn.Close(ctx); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("postgres baseline: drop schema %s: %w", schema, err)
			}
			return nil
		},
	}, nil
}

// postgresConcurrentBaseline runs pgbench's workload for writers clients:
// the same single-row INSERT in autocommit as postgresBaseline, prepared
// (pgbench -M prepared), from writers connections at once, the one each.
func postgresConcurrentBaseline(ctx context.Context, raw string, writers int) (*baseline, error) {
	cfg, err := postgres.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("postgres concurrent baseline: %w", err)
	}
	pc, err := pgxpool.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, fmt.Errorf("postgres concurrent baseline: %w", err)
	}
	pc.MaxConns, pc.MinConns = int32(writers), int32(writers)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres concurrent baseline: connect to %s: %w", Redact(raw), err)
	}
	schema := throwawayName("varve_baseline_")
	fail := func(what string, err error) (*baseline, error) {
		_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		pool.Close()
		return nil, fmt.Errorf("postgres concurrent baseline: %s: %w", what, err)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fail("create schema", err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE "+schema+`.events (
		pos bigserial PRIMARY KEY, id uuid NOT NULL, type text NOT NULL, data bytea NOT NULL)`); err != nil {
		return fail("create table", err)
	}
	insert := "INSERT INTO " + schema + ".events (id, type, data) VALUES ($1, $2, $3)"
	return &baseline{
		name:    fmt.Sprintf("%d× bare INSERT", writers),
		about:   fmt.Sprintf("pgbench's workload: one single-row INSERT per transaction into a bare table from each of %d connections at once (pgx pool)", writers),
		workers: writers,
		newOp: func(int) workload.Op {
			return func(ctx context.Context) (int, error) {
				if _, err := pool.Exec(ctx, insert, [16]byte(varve.NewEventID()), "OrderPlaced", workload.Payload); err != nil {
					return 0, fmt.Errorf("postgres concurrent baseline: insert: %w", err)
				}
				return 1, nil
			}
		},
		close: func(ctx context.Context) error {
			_, err := pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			pool.Close()
			if err != nil {
				return fmt.Errorf("postgres concurrent baseline: drop schema %s: %w", schema, err)
			}
			return nil
		},
	}, nil
}
