package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/varve-go/varve"
)

// BenchmarkBaseline is what issue 3 measures varve against, run beside
// BenchmarkSuite in one `go test -bench`: a plain single-row INSERT in
// autocommit into a bare table (no index, no constraint), from 1 and 8
// clients, and a CopyFrom of 100 rows. Compare events/s with
// Suite/Append/Single, Suite/Concurrent/Workers8 and Suite/Append/Batch100.
func BenchmarkBaseline(b *testing.B) {
	ctx := context.Background()
	cfg := config(b, testSchema+"_baseline")
	be := open(b, cfg) // creates the schema
	pc, err := pgxpool.ParseConfig(cfg.ConnString)
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	table := be.Schema() + ".bare"
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (stream text, version bigint, id uuid, type text, data bytea, metadata bytea)"); err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"amount":42,"currency":"EUR","note":"benchmark payload"}`)
	insert := "INSERT INTO " + table + " (stream, version, id, type, data) VALUES ($1, $2, $3, $4, $5)"
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("insert/clients=%d", clients), func(b *testing.B) {
			var wg sync.WaitGroup
			per := b.N / clients
			for c := range clients {
				n := per
				if c == 0 {
					n += b.N % clients
				}
				wg.Go(func() {
					for i := range n {
						if _, err := pool.Exec(ctx, insert, fmt.Sprintf("bare-%d", c), i, varve.NewEventID(), "BenchEvent", data); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
	b.Run("copyfrom/rows=100", func(b *testing.B) {
		rows := make([][]any, 100)
		for b.Loop() {
			for i := range rows {
				rows[i] = []any{"copy", int64(i), varve.NewEventID(), "BenchEvent", data, nil}
			}
			if _, err := pool.CopyFrom(ctx, pgx.Identifier{cfg.Schema, "bare"}, []string{"stream", "version", "id", "type", "data", "metadata"}, pgx.CopyFromRows(rows)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "events/s")
	})
}
