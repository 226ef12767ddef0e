package backendtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/workload"
)

// benchConsistency measures appends across streams against single-stream
// appends in the same run, on backends that have the capabilities:
//   - Single: 1 event to one of 1,000 streams (the yardstick);
//   - Multi2: 1 event to each of 2 of 1,000 streams, atomically;
//   - DCB1: 1 event tagged with one of 1,000 tags, on the condition that
//     nothing with its tag came after the previous append of that tag;
//   - Writers1 and Writers8: DCB1 from 1 and 8 writers on tags of their
//     own, to compare with Single and 8 writers of single appends.
func benchConsistency(b *testing.B, f Factory) {
	single := func(s *varve.Store, pfx string, w int) func(ctx context.Context, i int) (int, error) {
		ev := []varve.Event{{Type: "OrderPlaced", Data: workload.Payload}}
		return func(ctx context.Context, i int) (int, error) {
			ev[0].ID = varve.NewEventID()
			_, err := s.Append(ctx, fmt.Sprintf("%sw%d-s%d", pfx, w, i%1000), varve.Any, ev...)
			return 1, err
		}
	}
	multi := func(s *varve.Store, pfx string, w int) func(ctx context.Context, i int) (int, error) {
		return func(ctx context.Context, i int) (int, error) {
			parts := []varve.StreamAppend{
				{Stream: fmt.Sprintf("%sw%d-a%d", pfx, w, i%1000), Expected: varve.Any, Events: []varve.Event{{Type: "Debited", Data: workload.Payload}}},
				{Stream: fmt.Sprintf("%sw%d-b%d", pfx, w, i%1000), Expected: varve.Any, Events: []varve.Event{{Type: "Credited", Data: workload.Payload}}},
			}
			_, err := s.AppendMulti(ctx, parts)
			return 2, err
		}
	}
	dcb := func(s *varve.Store, pfx string, w int) func(ctx context.Context, i int) (int, error) {
		last, _ := s.LastPosition(context.Background())
		after := make([]varve.Position, 1000)
		for i := range after {
			after[i] = last
		}
		return func(ctx context.Context, i int) (int, error) {
			k := i % 1000
			tag := fmt.Sprintf("%sw%d-t%d", pfx, w, k)
			ev := varve.Event{Type: "Claimed", Data: workload.Payload, Tags: []string{tag}}
			cond := varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{tag}}}}, After: after[k]}
			res, err := s.AppendIf(ctx, fmt.Sprintf("%sw%d-d%d", pfx, w, k), varve.Any, cond, ev)
			after[k] = res.Position
			return 1, err
		}
	}
	// Interleaved: one writer alternates a single append, a multi-stream
	// append and a DCB append, each timed on its own, so that the three
	// share every moment of a noisy machine; it reports each one's
	// events/s and the ratios to the single append.
	b.Run("Interleaved", func(b *testing.B) {
		s := store(b, f)
		if !s.Capabilities().MultiAppend && !s.Capabilities().Tags {
			b.Skipf("%s has neither multi-stream appends nor DCB", s.Features().Name)
		}
		pfx := prefix(b)
		ops := []func(context.Context, int) (int, error){single(s, pfx, 0), nil, nil}
		if s.Capabilities().MultiAppend {
			ops[1] = multi(s, pfx, 0)
		}
		if s.Capabilities().Tags {
			ops[2] = dcb(s, pfx, 0)
		}
		var spent [3]time.Duration
		var events [3]int
		ctx := b.Context()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			for k, op := range ops {
				if op == nil {
					continue
				}
				start := time.Now()
				n, err := op(ctx, i)
				spent[k] += time.Since(start)
				if err != nil {
					b.Fatalf("op %d: %v", k, err)
				}
				events[k] += n
			}
		}
		b.StopTimer()
		rate := func(k int) float64 { return float64(events[k]) / spent[k].Seconds() }
		b.ReportMetric(rate(0), "single-events/s")
		if ops[1] != nil {
			b.ReportMetric(rate(1), "multi-events/s")
			b.ReportMetric(rate(1)/rate(0), "multi/single")
		}
		if ops[2] != nil {
			b.ReportMetric(rate(2), "dcb-events/s")
			b.ReportMetric(rate(2)/rate(0), "dcb/single")
		}
	})
	for _, c := range []struct {
		name    string
		writers int
		op      func(s *varve.Store, pfx string, w int) func(ctx context.Context, i int) (int, error)
		can     func(s *varve.Store) bool
	}{
		{"Single", 1, single, func(*varve.Store) bool { return true }},
		{"Multi2", 1, multi, func(s *varve.Store) bool { return s.Capabilities().MultiAppend }},
		{"DCB1", 1, dcb, func(s *varve.Store) bool { return s.Capabilities().Tags }},
		{"SingleWriters8", 8, single, func(*varve.Store) bool { return true }},
		{"DCBWriters8", 8, dcb, func(s *varve.Store) bool { return s.Capabilities().Tags }},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := store(b, f)
			if !c.can(s) {
				b.Skipf("%s lacks the capability", s.Features().Name)
			}
			pfx := prefix(b)
			ops := make([]func(context.Context, int) (int, error), c.writers)
			for w := range ops {
				ops[w] = c.op(s, pfx, w)
			}
			ctx := b.Context()
			var next, events atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, op := range ops {
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						n, err := op(ctx, int(i))
						if err != nil {
							b.Errorf("%s: %v", c.name, err)
							return
						}
						events.Add(int64(n))
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(events.Load())/b.Elapsed().Seconds(), "events/s")
		})
	}
}
