package retention_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/retention"
)

// BenchmarkScavengeSQLite: one pass over a SQLite file of 100 streams of
// 2,000 events of 200 bytes, a category policy keeping the last 100 of
// each: 190,000 events removed in steps, the space given back. It reports
// the events removed per second of the pass and the file's size before
// and after (closed, so checkpointed).
func BenchmarkScavengeSQLite(b *testing.B) {
	ctx := context.Background()
	const streams, per = 100, 2000
	data := make([]byte, 200)
	var removed, before, after int64
	for b.Loop() {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "x.db")
		be, err := sqlite.New(ctx, sqlite.Config{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		s, err := varve.New(be, varve.Config{})
		if err != nil {
			b.Fatal(err)
		}
		for st := range streams {
			for k := 0; k < per; k += 1000 {
				evs := make([]varve.Event, 1000)
				for i := range evs {
					evs[i] = varve.NewEvent("E", data)
				}
				if _, err := s.Append(ctx, fmt.Sprintf("order-%d", st), varve.Any, evs...); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := retention.Set(ctx, s, retention.Target{Category: "order"}, retention.Policy{MaxCount: 100}); err != nil {
			b.Fatal(err)
		}
		sc, err := retention.New(retention.Config{Store: s})
		if err != nil {
			b.Fatal(err)
		}
		size, err := be.Size(ctx)
		if err != nil {
			b.Fatal(err)
		}
		before += size
		b.StartTimer()
		rep, err := sc.ScavengeOnce(ctx)
		b.StopTimer()
		if err != nil || rep.Removed != streams*(per-100) {
			b.Fatalf("pass: %+v, %v", rep, err)
		}
		removed += rep.Removed
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		after += fi.Size()
		b.StartTimer()
	}
	b.ReportMetric(float64(removed)/b.Elapsed().Seconds(), "removed/s")
	b.ReportMetric(float64(before)/float64(b.N), "bytes-before")
	b.ReportMetric(float64(after)/float64(b.N), "bytes-after")
}
