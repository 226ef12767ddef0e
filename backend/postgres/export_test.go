package postgres

import (
	"context"
	"reflect"

	"github.com/varve-go/varve"
)

// UseXminHorizon makes b read $all below the xmin of the whole server, as
// schemas before migration 5 are read: the baseline of the horizon
// benchmarks.
func UseXminHorizon(b *Backend) {
	b.sql = newQueries(b.schema, xminHorizon, b.version)
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
