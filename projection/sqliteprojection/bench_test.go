package sqliteprojection_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/projection/internal/eotest"
	"github.com/varve-go/varve/projection/sqliteprojection"
)

// BenchmarkProject compares a projection that upserts one row per event,
// a write transaction per batch, with a bare loop doing the same upserts
// in the same batches through the same writer (WriteTx) over events
// already read: the cost of the runner (reads, the checkpoint read and
// saved in the transaction, bookkeeping). Each iteration projects the same
// events into a fresh version; run with -count to interleave the two.
func BenchmarkProject(b *testing.B) {
	const events, page = 2000, 100
	s, sb := openSQLite(b)
	eotest.Load(b, s, 20, 10, events/200)
	var all []varve.RecordedEvent
	for e, err := range s.ReadAll(context.Background(), varve.Start, eotest.Counted) {
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, e)
	}
	if len(all) != events {
		b.Fatalf("%d events loaded, want %d", len(all), events)
	}
	version := 0
	b.Run("bare", func(b *testing.B) {
		h := counts(nil)
		for b.Loop() {
			version++
			for i := 0; i < len(all); i += page {
				ctx := context.Background()
				batch := projection.Batch{Events: all[i:min(i+page, len(all))], Version: version}
				if err := sb.WriteTx(ctx, func(tx *sql.Tx) error { return h(ctx, tx, batch) }); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("projection", func(b *testing.B) {
		for b.Loop() {
			version++
			handled := catchUp(b, s, version, page)
			if handled != events {
				b.Fatalf("handled %d events, want %d", handled, events)
			}
		}
		b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// catchUp runs version of the counts projection until it is live and
// returns the events it handled.
func catchUp(b *testing.B, s *varve.Store, version, page int) int64 {
	p, err := sqliteprojection.Projection(s, projection.Projection{Name: "counts", Version: version, Filter: eotest.Counted}, counts(nil))
	if err != nil {
		b.Fatal(err)
	}
	r, err := projection.NewRunner(s, p, projection.Config{PageSize: page})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-r.Live()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return r.Status().Handled
}

// BenchmarkCatchUp100k projects a log of 100,000 matching events (and
// 1,000 others) from the start, in pages of 500: the catch-up rate.
func BenchmarkCatchUp100k(b *testing.B) {
	const streams, appends, per = 100, 10, 100
	s, _ := openSQLite(b)
	eotest.Load(b, s, streams, appends, per)
	version := 0
	for b.Loop() {
		version++
		if n := catchUp(b, s, version, 500); n != streams*appends*per {
			b.Fatalf("handled %d events, want %d", n, streams*appends*per)
		}
	}
	b.ReportMetric(float64(streams*appends*per*b.N)/b.Elapsed().Seconds(), "events/s")
}
