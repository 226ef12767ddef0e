package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/internal/workload"
)

// BenchmarkTaggedPaths alternates, from one writer, a single-event append,
// a DCB append (one event with one tag, on the condition that nothing with
// that tag came after the tag's previous append) through the pipelined
// statements, and the same through append_tagged_fast, each timed on its
// own so that the three share every moment of a noisy machine. It reports
// each one's appends/s and the ratios to the single append.
func BenchmarkTaggedPaths(b *testing.B) {
	cfg := config(b, testSchema)
	pipe, err := varve.New(open(b, cfg), varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	fb := open(b, cfg)
	postgres.UseTaggedFunction(fb)
	fn, err := varve.New(fb, varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	pfx := fmt.Sprintf("tp%d-", time.Now().UnixNano())
	start, err := pipe.LastPosition(ctx)
	if err != nil {
		b.Fatal(err)
	}
	dcb := func(s *varve.Store, kind string) func(i int) error {
		after := make([]varve.Position, 1000)
		for i := range after {
			after[i] = start
		}
		return func(i int) error {
			k := i % 1000
			tag := fmt.Sprintf("%s%s-t%d", pfx, kind, k)
			ev := varve.Event{ID: varve.NewEventID(), Type: "Claimed", Data: workload.Payload, Tags: []string{tag}}
			cond := varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{tag}}}}, After: after[k]}
			res, err := s.AppendIf(ctx, fmt.Sprintf("%s%s-d%d", pfx, kind, k), varve.Any, cond, ev)
			after[k] = res.Position
			return err
		}
	}
	ops := []func(i int) error{
		func(i int) error {
			_, err := pipe.Append(ctx, fmt.Sprintf("%ss-%d", pfx, i%1000), varve.Any,
				varve.Event{ID: varve.NewEventID(), Type: "OrderPlaced", Data: workload.Payload})
			return err
		},
		dcb(pipe, "p"),
		dcb(fn, "f"),
	}
	var spent [3]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k, op := range ops {
			t := time.Now()
			if err := op(i); err != nil {
				b.Fatalf("op %d: %v", k, err)
			}
			spent[k] += time.Since(t)
		}
	}
	b.StopTimer()
	rate := func(k int) float64 { return float64(b.N) / spent[k].Seconds() }
	b.ReportMetric(rate(0), "single/s")
	b.ReportMetric(rate(1), "pipelined/s")
	b.ReportMetric(rate(2), "function/s")
	b.ReportMetric(rate(1)/rate(0), "pipelined/single")
	b.ReportMetric(rate(2)/rate(0), "function/single")
}
