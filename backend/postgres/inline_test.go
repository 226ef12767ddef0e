package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/postgres"
)

// inlineCounts is the inline projection of the tests and benchmarks: a
// row per stream with its events, last version and last position, in
// table (which it creates).
func inlineCounts(table string, calls *atomic.Int64) postgres.InlineFunc {
	return func(ctx context.Context, tx pgx.Tx, evs []varve.RecordedEvent) error {
		calls.Add(1)
		for _, e := range evs {
			if e.Type == backendtest.PoisonType {
				return backendtest.ErrPoison
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+table+` AS t (stream, n, last, pos_tx, pos_seq) VALUES ($1, 1, $2, $3, $4)
ON CONFLICT (stream) DO UPDATE SET n = t.n + 1, last = EXCLUDED.last, pos_tx = EXCLUDED.pos_tx, pos_seq = EXCLUDED.pos_seq`,
				e.Stream, int64(e.Version), int64(e.Position.Commit), int64(e.Position.Seq)); err != nil {
				return err
			}
		}
		return nil
	}
}

// openInline opens a backend with hook in a new schema, and the table
// of inlineCounts in it.
func openInline(t testing.TB, hook func(table string) postgres.InlineFunc) (*varve.Store, *postgres.Backend, string) {
	t.Helper()
	var id [4]byte
	_, _ = rand.Read(id[:])
	schema := testSchema + "_inl_" + hex.EncodeToString(id[:])
	table := `"` + schema + `".inline_rm`
	cfg := config(t, schema)
	if hook != nil {
		cfg.Inline = hook(table)
	}
	b := open(t, cfg)
	if _, err := b.Pool().Exec(context.Background(), `CREATE TABLE `+table+` (stream text PRIMARY KEY, n bigint NOT NULL, last bigint NOT NULL, pos_tx bigint NOT NULL, pos_seq bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, b, table
}

func TestInline(t *testing.T) {
	var calls atomic.Int64
	s, b, table := openInline(t, func(table string) postgres.InlineFunc { return inlineCounts(table, &calls) })
	backendtest.Inline(t, s, backendtest.InlineModel{
		Calls: calls.Load,
		Read: func(t testing.TB, prefix string) map[string]backendtest.InlineRow {
			t.Helper()
			rows, err := b.Pool().Query(context.Background(), `SELECT stream, n, last, pos_tx, pos_seq FROM `+table+` WHERE starts_with(stream, $1)`, prefix)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			got := map[string]backendtest.InlineRow{}
			for rows.Next() {
				var st string
				var n, last, tx, seq int64
				if err := rows.Scan(&st, &n, &last, &tx, &seq); err != nil {
					t.Fatal(err)
				}
				got[st] = backendtest.InlineRow{N: n, Last: varve.Version(last), Pos: varve.Position{Commit: uint64(tx), Seq: uint64(seq)}}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return got
		},
	})
}

// BenchmarkInline measures what an inline projection costs an append of
// one event: none (no hook: the one-statement fast path), trivial (a hook
// that writes nothing: the explicit transaction and the read-back) and
// upsert (inlineCounts: one upsert per event); seq is one appender, par
// 8 appenders per CPU on streams of their own. Compare the
// sub-benchmarks of one run, or alternate them with -bench filters.
func BenchmarkInline(b *testing.B) {
	benchInline(b, func(b *testing.B, name string) *varve.Store {
		var hook func(string) postgres.InlineFunc
		switch name {
		case "trivial":
			hook = func(string) postgres.InlineFunc {
				return func(context.Context, pgx.Tx, []varve.RecordedEvent) error { return nil }
			}
		case "upsert":
			hook = func(table string) postgres.InlineFunc { return inlineCounts(table, new(atomic.Int64)) }
		}
		s, _, _ := openInline(b, hook)
		return s
	})
}

func benchInline(b *testing.B, open func(b *testing.B, hook string) *varve.Store) {
	for _, hook := range []string{"none", "trivial", "upsert"} {
		b.Run(hook+"/seq", func(b *testing.B) {
			s := open(b, hook)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				if _, err := s.Append(ctx, "inl-"+strconv.Itoa(i%100), varve.Any, varve.NewEvent("Counted", []byte(`{}`))); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
		b.Run(hook+"/par", func(b *testing.B) {
			s := open(b, hook)
			var g atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				stream := "inl-p" + strconv.FormatInt(g.Add(1), 10) + "-"
				for i := 0; pb.Next(); i++ {
					if _, err := s.Append(ctx, stream+strconv.Itoa(i%10), varve.Any, varve.NewEvent("Counted", []byte(`{}`))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
