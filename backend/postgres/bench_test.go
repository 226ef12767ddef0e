package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/postgres"
)

// Every benchmark runs a varve operation and its baseline alternately in
// the same loop, on the same server, so that the noise of a shared machine
// falls on both alike. The baseline is the plainest pgx statement doing the
// storage part of the work, on a table with a primary key and a
// (stream, version) index: no concurrency control, no idempotency, no
// gap-safe order. Each reports base-ns/op, varve-ns/op and their ratio
// varve/base; ns/op is the time of the pair.
//
// VARVE_BENCH_NO_NOTIFY=1 runs the backend with Config.NoNotify.

const baselineTable = `CREATE TABLE IF NOT EXISTS %[1]s.baseline (
    seq bigserial PRIMARY KEY, stream text NOT NULL, version bigint NOT NULL, id uuid NOT NULL,
    type text NOT NULL, data bytea, metadata bytea, recorded_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS baseline_stream ON %[1]s.baseline (stream, version)`

type benchEnv struct {
	b    *postgres.Backend
	s    *varve.Store
	pool *pgxpool.Pool // the baseline's, sized like the backend's
	tbl  string
}

func newBenchEnv(b *testing.B, conns int32) *benchEnv {
	b.Helper()
	cfg := config(b, testSchema+"_bench")
	cfg.MaxConns = conns
	cfg.NoNotify = os.Getenv("VARVE_BENCH_NO_NOTIFY") != ""
	be := open(b, cfg)
	s, err := varve.New(be, varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	pool := testPool(b, cfg.ConnString, conns)
	if _, err := pool.Exec(context.Background(), fmt.Sprintf(baselineTable, be.Schema())); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{b: be, s: s, pool: pool, tbl: be.Schema() + ".baseline"}
}

// pair accumulates the time spent in the baseline and in varve.
type pair struct {
	base, varve atomic.Int64
	ops         atomic.Int64
}

func (p *pair) timeBase(f func()) {
	t := time.Now()
	f()
	p.base.Add(int64(time.Since(t)))
}

func (p *pair) timeVarve(f func()) {
	t := time.Now()
	f()
	p.varve.Add(int64(time.Since(t)))
	p.ops.Add(1)
}

// report gives per-op times; with parallel writers the time is per op of
// one writer, and events/s counts all writers.
func (p *pair) report(b *testing.B, eventsPerOp, writers int) {
	n := float64(p.ops.Load())
	if n == 0 {
		return
	}
	base, vv := float64(p.base.Load())/n, float64(p.varve.Load())/n
	b.ReportMetric(base, "base-ns/op")
	b.ReportMetric(vv, "varve-ns/op")
	b.ReportMetric(vv/base, "varve/base")
	b.ReportMetric(float64(eventsPerOp*writers)/(vv/1e9), "varve-events/s")
}

func benchEvents(n int) []varve.Event {
	evs := make([]varve.Event, n)
	for i := range evs {
		evs[i] = varve.Event{Type: "BenchEvent", Data: []byte(`{"amount":42,"currency":"EUR","note":"benchmark payload"}`), Metadata: []byte(`{"by":"bench"}`)}
	}
	return evs
}

func freshIDs(evs []varve.Event) {
	for i := range evs {
		evs[i].ID = varve.NewEventID()
	}
}

var benchRun atomic.Int64

// baseAppender inserts events into the baseline table in one statement.
type baseAppender struct {
	sql        string
	stream     string
	version    int64
	ids        [][16]byte
	types      []string
	data, meta [][]byte
}

func newBaseAppender(env *benchEnv) *baseAppender {
	return &baseAppender{
		sql: `INSERT INTO ` + env.tbl + ` (stream, version, id, type, data, metadata)
SELECT $1, $2 + r.ord, r.id, r.typ, r.dat, r.met
FROM unnest($3::uuid[], $4::text[], $5::bytea[], $6::bytea[]) WITH ORDINALITY AS r(id, typ, dat, met, ord)`,
		stream: fmt.Sprintf("base-%d", benchRun.Add(1)),
	}
}

func (a *baseAppender) append(b *testing.B, pool *pgxpool.Pool, evs []varve.Event) {
	a.ids, a.types, a.data, a.meta = a.ids[:0], a.types[:0], a.data[:0], a.meta[:0]
	for _, e := range evs {
		a.ids, a.types = append(a.ids, e.ID), append(a.types, e.Type)
		a.data, a.meta = append(a.data, e.Data), append(a.meta, e.Metadata)
	}
	if _, err := pool.Exec(context.Background(), a.sql, a.stream, a.version, a.ids, a.types, a.data, a.meta); err != nil {
		b.Error(err)
	}
	a.version += int64(len(evs))
}

// BenchmarkAppend: one writer appends 1 or 100 events at a time to its
// stream at an exact expected version.
func BenchmarkAppend(b *testing.B) {
	env := newBenchEnv(b, 4)
	ctx := context.Background()
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			evs := benchEvents(n)
			base := newBaseAppender(env)
			stream := fmt.Sprintf("varve-%d", benchRun.Add(1))
			var version varve.Version
			var p pair
			b.ReportAllocs()
			for b.Loop() {
				freshIDs(evs)
				p.timeBase(func() { base.append(b, env.pool, evs) })
				freshIDs(evs)
				p.timeVarve(func() {
					res, err := env.s.Append(ctx, stream, varve.Exact(version), evs...)
					if err != nil {
						b.Fatal(err)
					}
					version = res.LastVersion
				})
			}
			p.report(b, n, 1)
		})
	}
}

// BenchmarkAppendParallel: 16 writers each append one event at a time to
// their own stream. A ratio near that of BenchmarkAppend/events=1 shows that
// writers to different streams do not wait for each other and share
// PostgreSQL's group commit like plain INSERTs do.
func BenchmarkAppendParallel(b *testing.B) {
	const writers = 16
	env := newBenchEnv(b, writers)
	ctx := context.Background()
	b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
		var p pair
		b.SetParallelism(writers / 2) // GOMAXPROCS is 2 here
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			evs := benchEvents(1)
			base := newBaseAppender(env)
			stream := fmt.Sprintf("pvarve-%d", benchRun.Add(1))
			var version varve.Version
			for pb.Next() {
				freshIDs(evs)
				p.timeBase(func() { base.append(b, env.pool, evs) })
				freshIDs(evs)
				p.timeVarve(func() {
					res, err := env.s.Append(ctx, stream, varve.Exact(version), evs...)
					if err != nil {
						b.Error(err)
						return
					}
					version = res.LastVersion
				})
			}
		})
		p.report(b, 1, writers)
	})
}

// BenchmarkRead: pages of $all and of one stream; the baseline reads the
// same rows from its table with pgx's usual Scan.
func BenchmarkRead(b *testing.B) {
	env := newBenchEnv(b, 4)
	ctx := context.Background()
	const total = 20_000
	evs := benchEvents(100)
	base := newBaseAppender(env)
	long := fmt.Sprintf("long-%d", benchRun.Add(1))
	for i := range total / 100 {
		freshIDs(evs)
		stream := fmt.Sprintf("read-%d-%d", benchRun.Add(1), i%50)
		if i%10 == 0 {
			stream = long
		}
		if _, err := env.s.Append(ctx, stream, varve.Any, evs...); err != nil {
			b.Fatal(err)
		}
		base.stream = stream
		base.append(b, env.pool, evs)
	}
	scan := func(sql string, args ...any) []varve.RecordedEvent {
		rows, err := env.pool.Query(ctx, sql, args...)
		if err != nil {
			b.Fatal(err)
		}
		var out []varve.RecordedEvent
		for rows.Next() {
			var e varve.RecordedEvent
			var seq int64
			if err := rows.Scan(&seq, &e.Stream, &e.Version, &e.ID, &e.Type, &e.Data, &e.Metadata, &e.RecordedAt); err != nil {
				b.Fatal(err)
			}
			e.Position.Seq = uint64(seq)
			out = append(out, e)
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		return out
	}
	const cols = `seq, stream, version, id, type, data, metadata, recorded_at`
	// Short streams of 10 events, in varve and in the baseline table.
	const shorts = 50
	short := func(i int) string { return fmt.Sprintf("short-%d-%d", benchRun.Load(), i%shorts) }
	benchRun.Add(1)
	ten := benchEvents(10)
	for i := range shorts {
		freshIDs(ten)
		if _, err := env.s.Append(ctx, short(i), varve.NoStream, ten...); err != nil {
			b.Fatal(err)
		}
		base.stream, base.version = short(i), 0
		base.append(b, env.pool, ten)
	}

	b.Run("all/page=512", func(b *testing.B) {
		const page = 512
		sql := `SELECT ` + cols + ` FROM ` + env.tbl + ` WHERE seq > $1 ORDER BY seq LIMIT $2`
		var baseAfter int64
		var after varve.Position
		var p pair
		buf := make([]varve.RecordedEvent, 0, page)
		b.ReportAllocs()
		for b.Loop() {
			p.timeBase(func() {
				got := scan(sql, baseAfter, page)
				if len(got) < page {
					baseAfter = 0
				} else {
					baseAfter = int64(got[len(got)-1].Position.Seq)
				}
			})
			p.timeVarve(func() {
				var err error
				buf, err = env.b.ReadAll(ctx, varve.AllQuery{After: after, Limit: page}, buf[:0])
				if err != nil {
					b.Fatal(err)
				}
				if len(buf) < page {
					after = varve.Start
				} else {
					after = buf[len(buf)-1].Position
				}
			})
		}
		p.report(b, page, 1)
	})
	b.Run("stream/page=100", func(b *testing.B) {
		const page = 100
		sql := `SELECT ` + cols + ` FROM ` + env.tbl + ` WHERE stream = $1 AND version >= $2 ORDER BY version LIMIT $3`
		var from varve.Version = 1
		var p pair
		buf := make([]varve.RecordedEvent, 0, page)
		b.ReportAllocs()
		for b.Loop() {
			p.timeBase(func() { scan(sql, long, int64(from), page) })
			p.timeVarve(func() {
				var err error
				buf, err = env.b.ReadStream(ctx, varve.StreamQuery{Stream: long, From: from, Limit: page}, buf[:0])
				if err != nil || len(buf) != page {
					b.Fatalf("read %d events: %v", len(buf), err)
				}
			})
			if from += page; from > total/10 {
				from = 1
			}
		}
		p.report(b, page, 1)
	})
	// Point reads, issue 40: one prepared SELECT on the baseline table is
	// the floor of each (a page of 10 rows; the last row of a stream; the
	// last row of the table).
	b.Run("point/stream=10", func(b *testing.B) {
		sql := `SELECT ` + cols + ` FROM ` + env.tbl + ` WHERE stream = $1 AND version >= $2 ORDER BY version LIMIT $3`
		var p pair
		buf := make([]varve.RecordedEvent, 0, 10)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			p.timeBase(func() {
				if got := scan(sql, short(i), int64(1), 10); len(got) != 10 {
					b.Fatalf("baseline read %d rows", len(got))
				}
			})
			p.timeVarve(func() {
				var err error
				buf, err = env.b.ReadStream(ctx, varve.StreamQuery{Stream: short(i), From: 1, Limit: 10}, buf[:0])
				if err != nil || len(buf) != 10 {
					b.Fatalf("read %d events: %v", len(buf), err)
				}
			})
		}
		p.report(b, 10, 1)
	})
	b.Run("point/info", func(b *testing.B) {
		sql := `SELECT version, seq, recorded_at FROM ` + env.tbl + ` WHERE stream = $1 ORDER BY version DESC LIMIT 1`
		var p pair
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			p.timeBase(func() {
				var version, seq int64
				var at time.Time
				if err := env.pool.QueryRow(ctx, sql, short(i)).Scan(&version, &seq, &at); err != nil || version != 10 {
					b.Fatalf("baseline version %d: %v", version, err)
				}
			})
			p.timeVarve(func() {
				info, err := env.b.StreamInfo(ctx, short(i))
				if err != nil || info.Version != 10 {
					b.Fatalf("version %d: %v", info.Version, err)
				}
			})
		}
		p.report(b, 1, 1)
	})
	b.Run("point/last-position", func(b *testing.B) {
		sql := `SELECT seq FROM ` + env.tbl + ` ORDER BY seq DESC LIMIT 1`
		var p pair
		b.ReportAllocs()
		for b.Loop() {
			p.timeBase(func() {
				var seq int64
				if err := env.pool.QueryRow(ctx, sql).Scan(&seq); err != nil {
					b.Fatal(err)
				}
			})
			p.timeVarve(func() {
				if _, err := env.b.LastPosition(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
		p.report(b, 1, 1)
	})
}

// The shared suite: the same workloads as every other backend.
func BenchmarkSuite(b *testing.B) {
	backendtest.Benchmark(b, backendtest.Factory{New: func(t testing.TB) varve.Backend {
		return open(t, config(t, testSchema))
	}})
}

func TestScale(t *testing.T) {
	backendtest.RunScale(t, backendtest.Factory{New: func(t testing.TB) varve.Backend {
		return open(t, config(t, testSchema))
	}}, backendtest.ScaleConfig{Events: 100_000})
}

// TestDCBScale: DCB as the log grows to 10 million events (opt-in).
func TestDCBScale(t *testing.T) {
	backendtest.RunDCBScale(t, backendtest.Factory{New: func(t testing.TB) varve.Backend {
		return open(t, config(t, testSchema))
	}})
}
