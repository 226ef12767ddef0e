package pgprojection_test

import (
	"context"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/projection/internal/eotest"
	"github.com/varve-go/varve/projection/pgprojection"
)

// BenchmarkProject compares a projection that upserts one row per event,
// a transaction per batch, with a bare loop doing the same upserts in the
// same batches over events already read: the cost of the runner (reads,
// checkpoint in the transaction, bookkeeping) from a runner's start until
// it is live, not its stop. Each iteration projects
// the same events into a fresh version; run with -count to interleave
// the two.
func BenchmarkProject(b *testing.B) {
	const events, page = 2000, 100
	s, pb := openPG(b)
	eotest.Load(b, s, 20, 10, events/200)
	pool, schema := pb.Pool(), pb.Schema()
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
		for b.Loop() {
			version++
			h := counts(schema, nil)
			for i := 0; i < len(all); i += page {
				ctx := context.Background()
				tx, err := pool.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := h(ctx, tx, projection.Batch{Events: all[i:min(i+page, len(all))], Version: version}); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("projection", func(b *testing.B) {
		for b.Loop() {
			version++
			p, err := pgprojection.Projection(s, projection.Projection{Name: "counts", Version: version, Filter: eotest.Counted}, counts(schema, nil))
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
			// Stopping is not projecting: the live runner's read in flight
			// is cancelled with a cancel request, and pgx then waits 100 ms
			// before it reuses the connection.
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if n := r.Status().Handled; n != events {
				b.Fatalf("handled %d events, want %d", n, events)
			}
		}
		b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
