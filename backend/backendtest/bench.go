package backendtest

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/varve-go/varve/internal/workload"
)

// Benchmark runs the shared benchmark suite against the factory's backends:
// the workloads of [workload.Suite] (seed 000's list: appends of 1, 10 and
// 100 events, with metadata and at an exact expected version; loads of
// streams of 10, 100 and 1,000 events; 8 and 32 concurrent writers; 80/20
// and 20/80 read/write mixes; StreamInfo and LastPosition). A backend's
// _test.go wires it in one function:
//
//	func BenchmarkSuite(b *testing.B) { backendtest.Benchmark(b, factory) }
//
// Every workload gets a fresh backend. Events are built before the timer
// starts. Each benchmark reports ns/op, B/op, allocs/op and, where an op
// moves events, events/s, in the Go benchmark format that benchstat reads.
// Benchmarks with several workers run them as goroutines that share b.N
// ops, so ns/op is wall time per op across all of them.
func Benchmark(b *testing.B, f Factory) {
	var groups []string
	members := map[string][]workload.Workload{}
	for _, w := range workload.Suite() {
		group, _, _ := strings.Cut(w.Bench, "/")
		if members[group] == nil {
			groups = append(groups, group)
		}
		members[group] = append(members[group], w)
	}
	for _, g := range groups {
		b.Run(g, func(b *testing.B) {
			for _, w := range members[g] {
				_, name, _ := strings.Cut(w.Bench, "/")
				b.Run(name, func(b *testing.B) { benchWorkload(b, f, w) })
			}
		})
	}
	b.Run("Consistency", func(b *testing.B) { benchConsistency(b, f) })
}

func benchWorkload(b *testing.B, f Factory, w workload.Workload) {
	s := store(b, f)
	ctx := b.Context()
	prep, err := w.Setup(ctx, s, workload.Params{Prefix: prefix(b)})
	if err != nil {
		b.Fatalf("set up %s: %v", w.Name, err)
	}
	ops := make([]workload.Op, w.Workers)
	for i := range ops {
		ops[i] = prep.NewOp(i)
	}
	b.ReportAllocs()
	var events int64
	if w.Workers == 1 {
		op := ops[0]
		for b.Loop() {
			n, err := op(ctx)
			if err != nil {
				b.Fatalf("%s: %v", w.Name, err)
			}
			events += int64(n)
		}
	} else {
		var next, total atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		for _, op := range ops {
			wg.Go(func() {
				var own int64
				for next.Add(1) <= int64(b.N) {
					n, err := op(ctx)
					if err != nil {
						b.Errorf("%s: %v", w.Name, err)
						return
					}
					own += int64(n)
				}
				total.Add(own)
			})
		}
		wg.Wait()
		b.StopTimer()
		events = total.Load()
	}
	if events > 0 {
		b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	}
}
