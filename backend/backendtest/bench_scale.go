package backendtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/workload"
)

// Environment variables of the scale tests.
const (
	// ScaleEnv must be set (to anything) for RunScale to run.
	ScaleEnv = "VARVE_SCALE"
	// ScaleEventsEnv overrides ScaleConfig.Events.
	ScaleEventsEnv = "VARVE_SCALE_EVENTS"
)

// ScaleConfig configures [RunScale].
type ScaleConfig struct {
	// Events is the budget of each scale test: the events it appends, or
	// reads for the full-stream load. Default 100,000; the memory backend
	// uses 1,000,000.
	Events int
	// ProgressEvery is how often a running test logs its progress;
	// default 5 seconds.
	ProgressEvery time.Duration
}

// RunScale runs the scale tests of [workload.Scale] (seed 000's table:
// sequential append, batch append x100, 8 concurrent writers, full-stream
// load, 1,000 streams) one after the other, each on a fresh backend, and
// logs throughput and the p50, p90, p99, p99.9 and max latency of an op
// (exact, from every op's duration), then a summary table. They are opt-in because they
// take long: without VARVE_SCALE set they skip.
//
//	VARVE_SCALE=1 go test -run TestScale -v -timeout 30m ./backend/memory/
func RunScale(t *testing.T, f Factory, cfg ScaleConfig) {
	if os.Getenv(ScaleEnv) == "" {
		t.Skipf("scale tests are opt-in: set %s=1 (and %s=n to change the budget of %d events)", ScaleEnv, ScaleEventsEnv, max(cfg.Events, 100_000))
	}
	if cfg.Events <= 0 {
		cfg.Events = 100_000
	}
	if v := os.Getenv(ScaleEventsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number of events", ScaleEventsEnv, v)
		}
		cfg.Events = n
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 5 * time.Second
	}
	type row struct {
		w   workload.Workload
		res scaleResult
	}
	var rows []row
	r := workload.Round
	for _, w := range workload.Scale() {
		t.Run(w.Bench, func(t *testing.T) {
			s := store(t, f)
			var events atomic.Int64
			progress := time.NewTicker(cfg.ProgressEvery)
			defer progress.Stop()
			done := make(chan struct{})
			var start atomic.Int64
			logged := make(chan struct{})
			go func() {
				defer close(logged)
				for {
					select {
					case <-done:
						return
					case <-progress.C:
						t.Logf("%s: %d events in %v", w.Name, events.Load(), time.Since(time.Unix(0, start.Load())).Round(time.Millisecond))
					}
				}
			}()
			res, err := runScale(t.Context(), s, w, workload.Params{Prefix: prefix(t)}, cfg.Events, &events, &start)
			close(done)
			<-logged
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s (%s): %d events in %d ops, %v, %.0f events/s; op latency p50 %v p90 %v p99 %v p99.9 %v max %v",
				w.Name, w.About, res.events, res.ops, r(res.elapsed), res.eventsPerSec(),
				r(res.p50), r(res.p90), r(res.p99), r(res.p999), r(res.max))
			rows = append(rows, row{w, res})
		})
	}
	if len(rows) == 0 {
		return
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TEST\tEVENTS\tEVENTS/S\tP50\tP90\tP99\tP99.9\tMAX\t")
	for _, row := range rows {
		l := row.res
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%v\t%v\t%v\t%v\t%v\t\n", row.w.Bench, l.events, l.eventsPerSec(), r(l.p50), r(l.p90), r(l.p99), r(l.p999), r(l.max))
	}
	_ = tw.Flush()
	t.Logf("scale tests, %d-event budget, latency of one op:\n%s", cfg.Events, sb.String())
}

// scaleResult is what one scale test saw; latencies are exact percentiles
// of every op's duration.
type scaleResult struct {
	ops, events              int64
	elapsed                  time.Duration
	p50, p90, p99, p999, max time.Duration
}

func (r scaleResult) eventsPerSec() float64 { return float64(r.events) / r.elapsed.Seconds() }

// runScale sets w up and drives a budget of units on it, keeping the
// duration of every op (a million ops take 8 MB).
func runScale(ctx context.Context, s *varve.Store, w workload.Workload, p workload.Params, units int, events, start *atomic.Int64) (scaleResult, error) {
	p.Events = units
	prep, err := w.Setup(ctx, s, p)
	if err != nil {
		return scaleResult{}, fmt.Errorf("set up %s: %w", w.Name, err)
	}
	ops := make([]workload.Op, w.Workers)
	took := make([][]time.Duration, w.Workers)
	for i := range ops {
		ops[i] = prep.NewOp(i)
	}
	elapsed, _, err := workload.Drive(ctx, ops, workload.Limits{Ops: prep.Ops(units)},
		func(worker int, d time.Duration, n int) {
			took[worker] = append(took[worker], d)
			events.Add(int64(n))
		},
		func(t0 time.Time) { start.Store(t0.UnixNano()) })
	if err != nil {
		return scaleResult{}, fmt.Errorf("%s: %w", w.Name, err)
	}
	all := slices.Concat(took...)
	slices.Sort(all)
	res := scaleResult{ops: int64(len(all)), events: events.Load(), elapsed: elapsed}
	if len(all) > 0 {
		at := func(q float64) time.Duration { return all[min(int(q*float64(len(all))), len(all)-1)] }
		res.p50, res.p90, res.p99, res.p999, res.max = at(0.50), at(0.90), at(0.99), at(0.999), all[len(all)-1]
	}
	return res, nil
}
