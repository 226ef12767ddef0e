package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/sqlite"
)

// inlineCounts is the inline projection of the tests and benchmarks: a
// row per stream with its events, last version and last position.
func inlineCounts(calls *atomic.Int64) sqlite.InlineFunc {
	return func(ctx context.Context, tx *sql.Tx, evs []varve.RecordedEvent) error {
		calls.Add(1)
		for _, e := range evs {
			if e.Type == backendtest.PoisonType {
				return backendtest.ErrPoison
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO inline_rm (stream, n, last, pos) VALUES (?1, 1, ?2, ?3)
ON CONFLICT (stream) DO UPDATE SET n = n + 1, last = excluded.last, pos = excluded.pos`, e.Stream, int64(e.Version), int64(e.Position.Seq)); err != nil {
				return err
			}
		}
		return nil
	}
}

func openInline(t testing.TB, hook sqlite.InlineFunc) (*varve.Store, *sqlite.Backend) {
	t.Helper()
	b, err := sqlite.New(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "inline.db"), Synchronous: sqlite.SyncNormal, Inline: hook})
	if err != nil {
		t.Fatal(err)
	}
	err = b.WriteTx(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`CREATE TABLE inline_rm (stream TEXT PRIMARY KEY, n INTEGER NOT NULL, last INTEGER NOT NULL, pos INTEGER NOT NULL)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, b
}

func TestInline(t *testing.T) {
	var calls atomic.Int64
	s, b := openInline(t, inlineCounts(&calls))
	backendtest.Inline(t, s, backendtest.InlineModel{
		Calls: calls.Load,
		Read: func(t testing.TB, prefix string) map[string]backendtest.InlineRow {
			t.Helper()
			rows := map[string]backendtest.InlineRow{}
			err := b.ReadTx(context.Background(), func(tx *sql.Tx) error {
				r, err := tx.Query(`SELECT stream, n, last, pos FROM inline_rm WHERE substr(stream, 1, length(?1)) = ?1`, prefix)
				if err != nil {
					return err
				}
				defer r.Close()
				for r.Next() {
					var st string
					var n, last, pos int64
					if err := r.Scan(&st, &n, &last, &pos); err != nil {
						return err
					}
					rows[st] = backendtest.InlineRow{N: n, Last: varve.Version(last), Pos: varve.Position{Seq: uint64(pos)}}
				}
				return r.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			return rows
		},
	})
}

// BenchmarkInline measures what an inline projection costs an append of
// one event: none (no hook), trivial (a hook that writes nothing: the
// savepoints around the append and the hook) and upsert (inlineCounts:
// one upsert per event); seq is one appender, par 8 appenders per CPU on
// streams of their own (group commits). Compare the sub-benchmarks of one
// run, or alternate them with -bench filters.
func BenchmarkInline(b *testing.B) {
	open := func(b *testing.B, hook string) *varve.Store {
		var h sqlite.InlineFunc
		switch hook {
		case "trivial":
			h = func(context.Context, *sql.Tx, []varve.RecordedEvent) error { return nil }
		case "upsert":
			h = inlineCounts(new(atomic.Int64))
		}
		s, _ := openInline(b, h)
		return s
	}
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
