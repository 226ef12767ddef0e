package soakcore

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestBatchSlope(t *testing.T) {
	cases := []struct {
		name          string
		xs, ys        []float64
		batches       int
		slope, stderr float64
	}{
		{"line", []float64{0, 1, 2, 3, 4, 5}, []float64{1, 4, 7, 10, 13, 16}, 6, 3, 0},
		{"constant", []float64{0, 1, 2, 3}, []float64{5, 5, 5, 5}, 4, 0, 0},
		// Reference figures from Python's statistics.linear_regression and
		// the textbook standard error sqrt(SSE/(n-2)/Sxx).
		{"scattered", []float64{1, 2, 3, 4, 5}, []float64{1, 2, 1.3, 3.75, 2.25}, 5, 0.425, 0.305},
		// Batches of two: means (1.5, 2), (3.5, 6), (5.5, 10).
		{"batched", []float64{1, 2, 3, 4, 5, 6}, []float64{1, 3, 5, 7, 9, 11}, 3, 2, 0},
		{"two batches", []float64{1, 2, 3, 4}, []float64{0, 0, 4, 4}, 2, 2, 0},
		{"one sample", []float64{1}, []float64{1}, 10, 0, 0},
	}
	for _, tc := range cases {
		slope, se := BatchSlope(tc.xs, tc.ys, tc.batches)
		if math.Abs(slope-tc.slope) > 1e-9 || math.Abs(se-tc.stderr) > 1e-9 {
			t.Errorf("%s: slope %v +- %v, want %v +- %v", tc.name, slope, se, tc.slope, tc.stderr)
		}
	}
}

// sawing models the live heap of a leak-free sustained soak as the browser
// shows it: a 10 MiB mean, sawing 6 MB wide with a period of 20-90 s, plus
// collector jitter, sampled every second for 10 minutes; leak adds a steady
// growth in bytes per minute.
func sawing(seed uint64, leak float64) []MemSample {
	r := rand.New(rand.NewPCG(seed, 7))
	period := 20 + r.Float64()*70
	phase := r.Float64() * period
	var s []MemSample
	for i := range 600 {
		at := time.Duration(i) * time.Second
		saw := math.Mod(float64(i)+phase, period) / period
		live := 10<<20 + 6e6*(saw-0.5) + r.NormFloat64()*300e3 + leak*at.Minutes()
		s = append(s, MemSample{At: at, HeapLive: uint64(live), Goroutines: 8})
	}
	return s
}

// A leak-free run whose live heap saws as widely as the browser's is judged
// flat, and a leak of 1 MiB/min (10% of the heap per minute) in the same
// noise is judged growing, in nearly every run. The point slope alone
// (the verdict before) judged these leak-free runs growing one time in
// three. Smaller leaks hide in this much noise over 10 minutes (of 400
// runs, 100 KiB/min was caught in 6, 200 KiB/min in 82, 500 KiB/min in
// 274): a longer run narrows the interval.
func TestJudgeSawtooth(t *testing.T) {
	const runs = 200
	var falseAlarms, caught int
	pointSlopeAlarms := 0
	for seed := range uint64(runs) {
		v := Judge(sawing(seed, 0), 1, 16<<10, time.Minute)
		if v.Status == Insufficient {
			t.Fatalf("10 min of samples judged insufficient: %+v", v)
		}
		if !v.Flat {
			falseAlarms++
		}
		tr := v.Trends[0]
		if 100*tr.SlopePerMin*10/tr.Mean > 1 && tr.SlopePerMin > 16<<10 {
			pointSlopeAlarms++
		}
		if !Judge(sawing(seed, 1<<20), 1, 16<<10, time.Minute).Flat {
			caught++
		}
	}
	t.Logf("of %d runs: %d leak-free judged growing (%d by the point slope), %d leaking 1 MiB/min judged growing",
		runs, falseAlarms, pointSlopeAlarms, caught)
	if falseAlarms > runs/20 {
		t.Errorf("%d of %d leak-free runs judged growing", falseAlarms, runs)
	}
	if pointSlopeAlarms < runs/5 {
		t.Errorf("the model is no harder than the browser's heap: the point slope flagged only %d of %d", pointSlopeAlarms, runs)
	}
	if caught < runs*19/20 {
		t.Errorf("only %d of %d leaking runs judged growing", caught, runs)
	}
}

// A callback that ends the run gets no sample after that: when the end and
// a tick are both ready, the end wins (a discovery run in the browser
// posted a tick taken after its stop, which its report then lacked).
func TestMonitorStopsAtTheEnd(t *testing.T) {
	for range 50 {
		ctx, cancel := context.WithCancel(t.Context())
		calls, after := 0, 0
		samples := Monitor(ctx, time.Millisecond, nil, func(MemSample) {
			if ctx.Err() != nil {
				after++
			}
			if calls++; calls == 3 {
				cancel()
				time.Sleep(5 * time.Millisecond) // the next tick is ready too
			}
		})
		cancel()
		if after != 0 || len(samples) != 4 {
			t.Fatalf("%d samples handed over after the end; %d samples, want 3 and the last", after, len(samples))
		}
	}
}
