package postgres

import (
	"context"
	"fmt"
	"os"
	"reflect"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/migrate"
)

// xminHorizon is the oldest transaction id that the statement's snapshot
// still sees running, in any schema or database: the horizon of $all
// before writers announced themselves (migration 5 before the squash).
const xminHorizon = `(pg_snapshot_xmin(pg_current_snapshot())::text::bigint)`

// UseXminHorizon makes b read $all below the xmin of the whole server: the
// baseline of the horizon benchmarks.
func UseXminHorizon(b *Backend) {
	b.sql = newQueries(b.schema, xminHorizon)
	b.sql.taggedLocks, b.sql.taggedAppend = taggedStatements(newExpander(b.schema, b.seed))
}

// FilterQueries returns the statements of filtered reads: by category, by
// type, by stream prefix.
func FilterQueries(b *Backend) (byCategory, byType, byPrefix string) {
	return b.sql.readByCategory, b.sql.readByType, b.sql.readByPrefix
}

// UseTaggedFunction makes b append tagged and conditional events through
// append_tagged_fast, as before the pipelined statements: the baseline of
// BenchmarkTaggedPaths.
func UseTaggedFunction(b *Backend) {
	b.sql.taggedLocks, b.sql.taggedAppend = "", ""
}

// Statements returns the statements of b by name (those of its schema's
// version; empty ones left out).
func Statements(b *Backend) map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(b.sql)
	for i := range v.NumField() {
		if s := v.Field(i).String(); s != "" {
			out[v.Type().Field(i).Name] = s
		}
	}
	return out
}

// Seed returns the advisory lock key seed of b's schema.
func Seed(b *Backend) int64 { return b.seed }

// AppendTaggedFunction appends through append_tagged alone, the fallback
// of the one-round-trip paths.
func AppendTaggedFunction(ctx context.Context, b *Backend, req varve.AppendRequest, cond *varve.AppendCondition) error {
	args := argsPool.Get().(*appendArgs)
	defer args.release()
	qargs, err := taggedArgs(req, cond, args)
	if err != nil {
		return err
	}
	_, err = b.pool.Exec(ctx, b.appendTaggedSQL(), qargs...)
	return err
}

// CreateHistorySchema creates the schema with the migrations of the
// squashed history (testdata/migrations-v13) up to version upto, as New
// did before the squash: each in its own transaction, recorded in
// schema_migrations, with no code applied.
func CreateHistorySchema(ctx context.Context, conn *pgx.Conn, schema string, upto int64) error {
	ms, err := migrate.Load(os.DirFS("testdata"), "migrations-v13")
	if err != nil {
		return err
	}
	ident := pgx.Identifier{schema}.Sanitize()
	x := newExpander(ident, seedOf(schema))
	_, err = conn.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s;
CREATE TABLE %[1]s.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())`, ident))
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Version > upto {
			break
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL standard_conforming_strings = on"); err != nil {
				return err
			}
			if err := exec(ctx, tx, x, m.Name, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+ident+".schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// CreateBaselineSchema creates the schema with the embedded baseline
// alone and the code, in one transaction as New does, recorded in
// schema_migrations: a schema as New made it before the migrations after
// the baseline.
func CreateBaselineSchema(ctx context.Context, conn *pgx.Conn, schema string) error {
	ms, err := migrate.Load(embedded, "migrations")
	if err != nil {
		return err
	}
	code, err := migrate.LoadCode(embedded, "code")
	if err != nil {
		return err
	}
	ident := pgx.Identifier{schema}.Sanitize()
	x := newExpander(ident, seedOf(schema))
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL standard_conforming_strings = on;
CREATE SCHEMA %[1]s;
CREATE TABLE %[1]s.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())`, ident))
		if err != nil {
			return err
		}
		if err := exec(ctx, tx, x, ms[0].Name, ms[0].SQL); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+ident+".schema_migrations (version, name) VALUES ($1, $2)", ms[0].Version, ms[0].Name); err != nil {
			return err
		}
		for _, c := range code {
			if err := exec(ctx, tx, x, "code/"+c.Name, c.SQL); err != nil {
				return err
			}
		}
		return nil
	})
}

// SeedOf returns the seed of the advisory lock keys of the named schema.
func SeedOf(schema string) int64 { return seedOf(schema) }

// PositionNumber is the number of a position p of a transaction that wrote
// after events after it.
func PositionNumber(p varve.Position, after int64) (uint64, error) { return positionNumber(p, after) }

// LostInFlight is lostInFlight, for its table test.
var LostInFlight = lostInFlight

// Floor returns b's floor of $all reads (floor.go).
func Floor(b *Backend) int64 { h, _ := b.floor.get(); return h }

// Incarnation returns the server incarnation of b's floor.
func Incarnation(b *Backend) int64 { _, inc := b.floor.get(); return inc }
