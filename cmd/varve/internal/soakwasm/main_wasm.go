//go:build js && wasm

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/cmd/varve/internal/soakcore"
)

// config is what the page passes to varveSoakStart.
type config struct {
	Mode         string  `json:"mode"`
	DurationMS   int64   `json:"duration_ms"`
	MemoryLimit  int64   `json:"memory_limit"`
	PruneAbove   int     `json:"prune_above"`
	Workers      int     `json:"workers"`
	Rate         int     `json:"rate"`
	Aggregates   int     `json:"aggregates"`
	IntervalMS   int64   `json:"interval_ms"`
	ThresholdPct float64 `json:"threshold_pct"`
	MinSlope     float64 `json:"min_slope_bytes_per_min"`
	MinSpanMS    int64   `json:"min_span_ms"`
}

// figures is one sample as the page shows it.
type figures struct {
	AtMS        int64   `json:"at_ms"`
	HeapAlloc   uint64  `json:"heap_alloc"`
	HeapLive    uint64  `json:"heap_live"`
	Sys         uint64  `json:"sys"`
	NumGC       uint32  `json:"num_gc"`
	Goroutines  int     `json:"goroutines"`
	Ops         int64   `json:"ops"`
	Rate        float64 `json:"rate"` // commands per second since the previous sample
	LiveEvents  int64   `json:"live_events"`
	Appended    int64   `json:"events_appended"`
	Pruned      int64   `json:"streams_pruned"`
	Errors      int64   `json:"errors"`
	MemoryLimit int64   `json:"memory_limit"`
	// Mem and Counts are the sample and the counts as the native soak
	// records them: the server builds its report from them.
	Mem    soakcore.MemSample `json:"mem"`
	Counts soakcore.Counts    `json:"counts"`
}

// latency is the command latency in nanoseconds.
type latency struct {
	Samples int64   `json:"samples"`
	P50     int64   `json:"p50_ns"`
	P90     int64   `json:"p90_ns"`
	P99     int64   `json:"p99_ns"`
	P999    int64   `json:"p999_ns"`
	Max     int64   `json:"max_ns"`
	Mean    float64 `json:"mean_ns"`
}

// result is the end of a run as the page shows it.
type result struct {
	Mode        string           `json:"mode"`
	StopReason  string           `json:"stop_reason"`
	ElapsedMS   int64            `json:"elapsed_ms"`
	Counts      soakcore.Counts  `json:"counts"`
	Rate        float64          `json:"rate"` // commands per second over the run
	FirstError  string           `json:"first_error,omitempty"`
	MemoryLimit int64            `json:"memory_limit"` // as debug.SetMemoryLimit reported it during the run
	PeakLive    uint64           `json:"peak_heap_live"`
	LiveAtPeak  int64            `json:"live_events_at_peak"`
	Last        figures          `json:"last"`
	Samples     int              `json:"samples"`
	P50US       float64          `json:"p50_us"`
	P99US       float64          `json:"p99_us"`
	Latency     latency          `json:"latency"`
	Verdict     soakcore.Verdict `json:"verdict"`
	Error       string           `json:"error,omitempty"`
}

func main() {
	js.Global().Set("varveSoakStart", js.FuncOf(func(_ js.Value, args []js.Value) any {
		if len(args) != 1 || args[0].Type() != js.TypeString {
			return "varveSoakStart wants one JSON string"
		}
		var c config
		if err := json.Unmarshal([]byte(args[0].String()), &c); err != nil {
			return fmt.Sprintf("config: %v", err)
		}
		go run(c)
		return nil
	}))
	js.Global().Call("varveSoakReady")
	select {}
}

func publish(fn string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(result{Error: err.Error()})
	}
	if f := js.Global().Get(fn); f.Type() == js.TypeFunction {
		f.Invoke(string(b))
	}
}

func run(c config) {
	var res result
	defer func() { publish("varveSoakDone", res) }()
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		res.Error = err.Error()
		return
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		prevOps   int64
		prevAt    time.Duration
		lastYield atomic.Int64
		ceiling   atomic.Pointer[string]
		atCeiling atomic.Uint64 // the live heap that reached it
		live      = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	)
	lastYield.Store(time.Now().UnixNano())
	show := func(m soakcore.MemSample, n soakcore.Counts, limit int64) {
		f := figures{AtMS: m.At.Milliseconds(), HeapAlloc: m.HeapAlloc, HeapLive: m.HeapLive, Sys: m.Sys, NumGC: m.NumGC,
			Goroutines: m.Goroutines, Ops: n.Ops, LiveEvents: n.LiveEvents,
			Appended: n.Appended, Pruned: n.Pruned, Errors: n.Errors, MemoryLimit: limit, Mem: m, Counts: n}
		if d := m.At - prevAt; d > 0 {
			f.Rate = float64(n.Ops-prevOps) / d.Seconds()
		}
		prevOps, prevAt = n.Ops, m.At
		if m.HeapLive > res.PeakLive {
			res.PeakLive, res.LiveAtPeak = m.HeapLive, n.LiveEvents
		}
		res.MemoryLimit, res.Last = f.MemoryLimit, f
		publish("varveSoakSample", f)
	}
	cfg := soakcore.Config{
		// Go runs on the page's only thread and gives it back only when
		// every goroutine waits: workers running flat out (no rate cap)
		// would freeze the page. Every 25 ms each worker pauses for 2 ms,
		// so they pause together and the page paints and answers. Without
		// preemption on js/wasm a worker also keeps the garbage collector's
		// workers waiting: each command ends with a Gosched. Near the
		// memory limit the monitor's ticks still starve (no sample for
		// seconds while the collector runs back to back), so discovery
		// checks the live heap here too.
		OnOp: func() {
			runtime.Gosched()
			if time.Now().UnixNano()-lastYield.Load() <= int64(25*time.Millisecond) {
				return
			}
			if c.Mode == soakcore.Discovery && c.MemoryLimit > 0 {
				metrics.Read(live)
				if v := live[0].Value.Uint64(); v >= uint64(c.MemoryLimit)*9/10 && ceiling.Load() == nil {
					r := fmt.Sprintf("live heap %s reached 90%% of the memory limit %s", soakcore.MiB(v), soakcore.MiB(uint64(c.MemoryLimit)))
					atCeiling.Store(v)
					ceiling.Store(&r)
					cancel()
				}
			}
			time.Sleep(2 * time.Millisecond)
			lastYield.Store(time.Now().UnixNano())
		},
		Mode: c.Mode, Duration: time.Duration(c.DurationMS) * time.Millisecond, MemoryLimit: c.MemoryLimit,
		PruneAbove: c.PruneAbove, Workers: c.Workers, Rate: c.Rate, Aggregates: c.Aggregates,
		Interval: time.Duration(c.IntervalMS) * time.Millisecond,
		Sample: func(m soakcore.MemSample, n soakcore.Counts) {
			limit := debug.SetMemoryLimit(-1)
			if limit == math.MaxInt64 {
				limit = 0 // the runtime's default: no limit
			}
			show(m, n, limit)
		},
	}
	out, err := soakcore.Run(ctx, s, cfg)
	res.Mode, res.StopReason, res.ElapsedMS, res.Counts, res.Samples = c.Mode, out.StopReason, out.Elapsed.Milliseconds(), out.Counts, len(out.Samples)
	if r := ceiling.Load(); r != nil {
		res.StopReason, err = *r, nil
		// The samples, the last taken after the stop, may all be below it
		// (a collection ended in between): the ceiling is what was seen.
		if v := atCeiling.Load(); v > res.PeakLive {
			res.PeakLive, res.LiveAtPeak = v, out.Counts.LiveEvents
		}
	}
	if n := len(out.Samples); n > 0 {
		// The sample taken as the run ended, with the final counts (the
		// run has given the limit back: report the one it ran under).
		show(out.Samples[n-1], out.Counts, res.MemoryLimit)
	}
	if err != nil {
		res.Error = err.Error()
		return
	}
	if secs := out.Elapsed.Seconds(); secs > 0 {
		res.Rate = float64(out.Ops) / secs
	}
	res.FirstError = out.FirstError
	if out.Latency != nil && out.Latency.TotalCount() > 0 {
		res.P50US = float64(out.Latency.ValueAtQuantile(50)) / 1e3
		res.P99US = float64(out.Latency.ValueAtQuantile(99)) / 1e3
		h := out.Latency
		res.Latency = latency{Samples: h.TotalCount(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90), P99: h.ValueAtQuantile(99),
			P999: h.ValueAtQuantile(99.9), Max: h.Max(), Mean: h.Mean()}
	}
	minSpan := time.Duration(c.MinSpanMS) * time.Millisecond
	if minSpan == 0 {
		minSpan = time.Minute
	}
	res.Verdict = soakcore.Judge(out.Samples, c.ThresholdPct, c.MinSlope, minSpan)
}
