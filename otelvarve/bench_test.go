package otelvarve

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// discard is a span exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkOverhead measures the cost of the instrumentation: each
// iteration runs the operation once on a plain Store and once on a Store
// over the same backend with NewTracer and the SDK installed, in
// alternating order, and reports both times and their ratios (mean and
// median) as traced/plain. "traced": every span sampled, batched (the
// SDK's batch span processor, as in production) to an exporter that drops
// them, metrics aggregated for a reader that is never collected;
// "traced-sync": the same with the SDK's synchronous span processor, which
// wakes no goroutine per span; "metrics": the same meter provider and no
// tracer provider (the no-op one), which is the cost of the metrics alone.
func BenchmarkOverhead(b *testing.B) {
	for _, k := range []teststore.Kind{teststore.Kinds[0], teststore.Kinds[2]} { // memory, postgres
		b.Run(k.Name, func(b *testing.B) {
			backend := k.Backend(b)
			plain, err := varve.New(backend, varve.Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = plain.Close() })
			ctx := context.Background()
			data := []byte(`{"sku":"A-1","qty":2}`)
			for i := range 200 { // for the reads: 200 events past the start
				if _, err := plain.Append(ctx, "page-"+strconv.Itoa(i%10), varve.Any, varve.NewEvent("Added", data)); err != nil {
					b.Fatal(err)
				}
			}
			for _, mode := range []string{"traced", "traced-sync", "metrics"} {
				b.Run(mode, func(b *testing.B) {
					// WithBatcher starts its processor's goroutine, which
					// only the provider's Shutdown stops.
					var tp *sdktrace.TracerProvider
					if mode == "traced-sync" {
						tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}))
					} else {
						tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
					}
					mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
					defer func() {
						_ = tp.Shutdown(context.Background())
						_ = mp.Shutdown(context.Background())
					}()
					opts := []Option{WithTracerProvider(tp), WithMeterProvider(mp)}
					if mode == "metrics" {
						opts = []Option{WithTracerProvider(nooptrace.NewTracerProvider()), WithMeterProvider(mp)}
					}
					// The same backend, closed by plain's Close.
					traced, err := varve.New(backend, varve.Config{Tracer: NewTracer(opts...)})
					if err != nil {
						b.Fatal(err)
					}
					b.Run("append", func(b *testing.B) {
						i := 0
						interleave(b, plain, traced, func(s *varve.Store) error {
							i++
							_, err := s.Append(ctx, "bench-"+strconv.Itoa(i%512), varve.Any, varve.NewEvent("Added", data))
							return err
						})
					})
					b.Run("read_all_page", func(b *testing.B) {
						buf := make([]varve.RecordedEvent, 0, 100)
						interleave(b, plain, traced, func(s *varve.Store) error {
							page, err := s.ReadAllPage(ctx, varve.Start, buf[:0], varve.Limit(100))
							if err == nil && len(page.Events) != 100 {
								b.Fatalf("page of %d events", len(page.Events))
							}
							return err
						})
					})
				})
			}
		})
	}
}

// interleave runs op b.N times on each store, alternating which goes
// first, and reports the time of each and the ratios traced/plain.
func interleave(b *testing.B, plain, traced *varve.Store, op func(*varve.Store) error) {
	b.Helper()
	tPlain := make([]time.Duration, 0, b.N)
	tTraced := make([]time.Duration, 0, b.N)
	timed := func(s *varve.Store, into *[]time.Duration) {
		start := time.Now()
		if err := op(s); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			timed(plain, &tPlain)
			timed(traced, &tTraced)
		} else {
			timed(traced, &tTraced)
			timed(plain, &tPlain)
		}
	}
	b.StopTimer()
	var sp, sw time.Duration
	for i := range tPlain {
		sp += tPlain[i]
		sw += tTraced[i]
	}
	slices.Sort(tPlain)
	slices.Sort(tTraced)
	mp, mw := tPlain[len(tPlain)/2], tTraced[len(tTraced)/2]
	b.ReportMetric(float64(sp.Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(sw.Nanoseconds())/float64(b.N), "traced-ns/op")
	b.ReportMetric(float64(sw)/float64(sp), "ratio-mean")
	b.ReportMetric(float64(mw)/float64(mp), "ratio-median")
}
