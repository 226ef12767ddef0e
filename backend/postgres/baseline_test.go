package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// The baselines' table, row and statement: a bare table (no index, no
// constraint) and a plain single-row INSERT into it.
var bareData = []byte(`{"amount":42,"currency":"EUR","note":"benchmark payload"}`)

const bareInsert = "INSERT INTO %s.bare (stream, version, id, type, data) VALUES ($1, $2, $3, $4, $5)"

// bareTable opens the backend of cfg (which creates its schema), creates
// the bare table in that schema and returns a pool of 8 connections for
// the baseline statements.
func bareTable(b *testing.B, cfg postgres.Config) (*pgxpool.Pool, *postgres.Backend) {
	b.Helper()
	be := open(b, cfg)
	pool := testPool(b, cfg.ConnString, 8)
	if _, err := pool.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS "+be.Schema()+".bare (stream text, version bigint, id uuid, type text, data bytea, metadata bytea)"); err != nil {
		b.Fatal(err)
	}
	return pool, be
}

// testPool is a pgx pool of conns connections, closed when b ends.
func testPool(b *testing.B, connString string, conns int32) *pgxpool.Pool {
	b.Helper()
	pc, err := pgxpool.ParseConfig(connString)
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// BenchmarkBaseline is what issue 3 measures varve against, run beside
// BenchmarkSuite in one `go test -bench`: a plain single-row INSERT in
// autocommit into a bare table (no index, no constraint), from 1 and 8
// clients, and a CopyFrom of 100 rows. Compare events/s with
// Suite/Append/Single, Suite/Concurrent/Workers8 and Suite/Append/Batch100.
func BenchmarkBaseline(b *testing.B) {
	ctx := context.Background()
	cfg := config(b, testSchema+"_baseline")
	pool, _ := bareTable(b, cfg)
	insert, data := fmt.Sprintf(bareInsert, pgx.Identifier{cfg.Schema}.Sanitize()), bareData
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
						if _, err := pool.Exec(ctx, insert, fmt.Sprintf("bare-%d", c), i, [16]byte(varve.NewEventID()), "BenchEvent", data); err != nil {
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
				rows[i] = []any{"copy", int64(i), [16]byte(varve.NewEventID()), "BenchEvent", data, nil}
			}
			if _, err := pool.CopyFrom(ctx, pgx.Identifier{cfg.Schema, "bare"}, []string{"stream", "version", "id", "type", "data", "metadata"}, pgx.CopyFromRows(rows)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkTargets measures issue 3's targets with each varve call
// alternating with its baseline call in the same loop, so that the noise of
// a shared machine falls on both alike: a single-event append against the
// plain single-row INSERT into the bare table, from 1 and from 8 clients,
// and a 100-event append against a CopyFrom of 100 rows. It reports the
// events/s of each and their ratio varve/base (above 1 is faster than the
// baseline). The 8-clients-vs-1 scaling is the ratio of the two
// varve-events/s figures.
func BenchmarkTargets(b *testing.B) {
	ctx := context.Background()
	cfg := config(b, testSchema+"_targets")
	cfg.MaxConns = 8
	pool, be := bareTable(b, cfg)
	insert, data := fmt.Sprintf(bareInsert, be.Schema()), bareData
	s, err := varve.New(be, varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	// With several clients each one's calls run one after the other, so
	// the events/s of all clients is clients times one client's.
	report := func(b *testing.B, p *pair, events, clients int) {
		n := float64(p.ops.Load())
		base, vv := float64(p.base.Load())/n, float64(p.varve.Load())/n
		b.ReportMetric(float64(events*clients)*1e9/base, "base-events/s")
		b.ReportMetric(float64(events*clients)*1e9/vv, "varve-events/s")
		b.ReportMetric(base/vv, "varve/base")
	}
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("single/clients=%d", clients), func(b *testing.B) {
			var p pair
			var wg sync.WaitGroup
			per := b.N / clients
			for c := range clients {
				n := per
				if c == 0 {
					n += b.N % clients
				}
				stream := fmt.Sprintf("targets-%d-%d", benchRun.Add(1), c)
				wg.Go(func() {
					ev := varve.Event{Type: "BenchEvent", Data: data}
					var version varve.Version
					for i := range n {
						var err error
						p.timeBase(func() {
							_, err = pool.Exec(ctx, insert, stream, i, [16]byte(varve.NewEventID()), "BenchEvent", data)
						})
						if err != nil {
							b.Error(err)
							return
						}
						p.timeVarve(func() {
							var res varve.AppendResult
							res, err = s.Append(ctx, stream, varve.Exact(version), ev)
							version = res.LastVersion
						})
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			report(b, &p, 1, clients)
		})
	}
	b.Run("batch/events=100", func(b *testing.B) {
		var p pair
		rows := make([][]any, 100)
		evs := make([]varve.Event, 100)
		stream := fmt.Sprintf("targets-batch-%d", benchRun.Add(1))
		var version varve.Version
		for b.Loop() {
			for i := range rows {
				rows[i] = []any{"copy", int64(i), [16]byte(varve.NewEventID()), "BenchEvent", data, nil}
				evs[i] = varve.Event{Type: "BenchEvent", Data: data}
			}
			p.timeBase(func() {
				if _, err := pool.CopyFrom(ctx, pgx.Identifier{cfg.Schema, "bare"}, []string{"stream", "version", "id", "type", "data", "metadata"}, pgx.CopyFromRows(rows)); err != nil {
					b.Fatal(err)
				}
			})
			p.timeVarve(func() {
				res, err := s.Append(ctx, stream, varve.Exact(version), evs...)
				if err != nil {
					b.Fatal(err)
				}
				version = res.LastVersion
			})
		}
		report(b, &p, 100, 1)
	})
}
