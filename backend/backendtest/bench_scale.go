package backendtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/varve-go/varve/lab/workload"
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
// from an HDR histogram, then a summary table. They are opt-in because they
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
		res workload.Result
	}
	var rows []row
	r := workload.Round
	for _, w := range workload.Scale() {
		t.Run(w.Bench, func(t *testing.T) {
			s := store(t, f)
			live := new(workload.Live)
			done := make(chan struct{})
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				tick := time.NewTicker(cfg.ProgressEvery)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
						t.Logf("%s: %d events in %v", w.Name, live.Events(), live.Elapsed().Round(time.Millisecond))
					}
				}
			}()
			res, err := workload.Run(t.Context(), s, w, workload.Params{Prefix: prefix(t)}, cfg.Events, 0, live)
			close(done)
			<-stopped
			if err != nil {
				t.Fatal(err)
			}
			l := res.Latency
			t.Logf("%s (%s): %d events in %d ops, %v, %.0f events/s; op latency p50 %v p90 %v p99 %v p99.9 %v max %v; %.1f allocs/op",
				w.Name, w.About, res.Events, res.Ops, workload.Round(res.Elapsed), res.EventsPerSec,
				r(l.P50), r(l.P90), r(l.P99), r(l.P999), r(l.Max), res.AllocsPerOp)
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
		l := row.res.Latency
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%v\t%v\t%v\t%v\t%v\t\n", row.w.Bench, row.res.Events, row.res.EventsPerSec, r(l.P50), r(l.P90), r(l.P99), r(l.P999), r(l.Max))
	}
	_ = tw.Flush()
	t.Logf("scale tests, %d-event budget, latency of one op:\n%s", cfg.Events, sb.String())
}
