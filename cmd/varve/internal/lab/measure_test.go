package lab

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/internal/workload"
)

// TestMeasure: the latency summary, the timeline and the live counters agree
// with what ran, on a real workload and when a run is interrupted.
func TestMeasure(t *testing.T) {
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ws, err := workload.Select([]string{"append-batch10"})
	if err != nil {
		t.Fatal(err)
	}
	live := new(Live)
	res, err := Run(t.Context(), s, ws[0], workload.Params{Prefix: "m-"}, 1000, 0, 0, live)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != workload.StopBudget || res.Ops != 100 || res.Events != 1000 {
		t.Fatalf("stopped %q after %d ops and %d events, want budget after 100 and 1000", res.Stopped, res.Ops, res.Events)
	}
	if l := res.Latency; l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max {
		t.Fatalf("latency summary out of order: %+v", l)
	}
	var sum int64
	for _, p := range res.Timeline {
		sum += p.Ops
	}
	if sum != res.Ops || live.Ops() != res.Ops || live.Events() != res.Events {
		t.Fatalf("timeline holds %d ops, live %d/%d; result %d/%d", sum, live.Ops(), live.Events(), res.Ops, res.Events)
	}

	// The run is interrupted when its second op completes, so that it is
	// interrupted with an op done however slow the machine (a timer could
	// fire before any op ran on a starved one).
	ctx, cancel := context.WithCancel(t.Context())
	var completed atomic.Int64
	slow := func(int) workload.Op {
		return func(ctx context.Context) (int, error) {
			select {
			case <-time.After(time.Millisecond):
				if completed.Add(1) == 2 {
					cancel()
				}
				return 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
	res, err = Measure(ctx, 4, slow, Limits{Ops: 1 << 30}, nil)
	if err != nil || res.Stopped != workload.StopInterrupted || res.Ops == 0 {
		t.Fatalf("got %q after %d ops, error %v; want interrupted with what ran", res.Stopped, res.Ops, err)
	}
	if _, err := Measure(t.Context(), 0, slow, Limits{Ops: 1}, nil); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("no workers: %v", err)
	}
}
