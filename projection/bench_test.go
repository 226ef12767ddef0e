package projection_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
)

// BenchmarkCatchUp measures a projection catching up over 100,000 events
// (a handler that only counts them) on SQLite and PostgreSQL in the same
// run. Each iteration is a new version, so it reads the whole log.
func BenchmarkCatchUp(b *testing.B) {
	const events, per = 100_000, 100
	for _, k := range teststore.Kinds {
		if k.Name != "sqlite" && k.Name != "postgres" {
			continue
		}
		b.Run(k.Name, func(b *testing.B) {
			s := k.Open(b, varve.Config{})
			ctx := context.Background()
			for i := range events / per {
				evs := make([]varve.Event, per)
				for j := range evs {
					evs[j] = varve.NewEvent("Counted", []byte(`{"n":1}`))
				}
				if _, err := s.Append(ctx, fmt.Sprintf("cnt-%d", i%100), varve.Any, evs...); err != nil {
					b.Fatal(err)
				}
			}
			version := 0
			for b.Loop() {
				version++
				n := 0
				r, err := projection.NewRunner(s, projection.Projection{Name: "bench", Version: version,
					Filter: varve.Filter{Categories: []string{"cnt"}},
					Handle: func(_ context.Context, batch projection.Batch) error { n += len(batch.Events); return nil }},
					projection.Config{PageSize: 500})
				if err != nil {
					b.Fatal(err)
				}
				rctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- r.Run(rctx) }()
				<-r.Live()
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				if n != events {
					b.Fatalf("handled %d events, want %d", n, events)
				}
			}
			b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
