package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/varve-go/varve"
)

// TimelineStep is the interval between two points of a timeline.
const TimelineStep = 250 * time.Millisecond

// maxPoints bounds a timeline: beyond it, neighbouring points are merged.
const maxPoints = 1200

// Histogram range: 1 ns to 10 minutes.
const (
	lowest  = 1
	highest = int64(10 * time.Minute)
)

// Why a measurement stopped.
const (
	StopBudget      = "budget"      // every op of the budget ran
	StopDuration    = "duration"    // the time limit passed
	StopInterrupted = "interrupted" // the context ended
	StopError       = "error"       // an op failed
)

// Limits bound a measurement.
type Limits struct {
	// Ops is the op budget; at least 1.
	Ops int
	// Duration stops the measurement early when it is positive.
	Duration time.Duration
}

// Latency summarizes the latencies of one op, in nanoseconds in JSON.
type Latency struct {
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
	Mean time.Duration `json:"mean_ns"`
}

// Point is one interval of a timeline. When a long run's timeline is
// thinned, two neighbouring points become one: counts add up, P50 becomes
// their op-weighted mean and P99 and Max the larger of the two, so a merged
// point's P99 is an upper bound.
type Point struct {
	// At is the end of the interval, from the start of the measurement.
	At     time.Duration `json:"at_ns"`
	Ops    int64         `json:"ops"`
	Events int64         `json:"events"`
	P50    time.Duration `json:"p50_ns"`
	P99    time.Duration `json:"p99_ns"`
	Max    time.Duration `json:"max_ns"`
}

// Result is what a measurement saw.
type Result struct {
	Ops          int64         `json:"ops"`
	Events       int64         `json:"events"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	OpsPerSec    float64       `json:"ops_per_sec"`
	EventsPerSec float64       `json:"events_per_sec"`
	Latency      Latency       `json:"latency"`
	// AllocsPerOp and BytesPerOp are the heap allocations of the whole
	// process during the measurement, per op: the store, its driver and the
	// measuring itself; a server's own allocations are not in them.
	AllocsPerOp float64 `json:"allocs_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	// Stopped says why the measurement ended: budget, duration or
	// interrupted.
	Stopped  string  `json:"stopped"`
	Timeline []Point `json:"timeline"`
}

// Rate returns the throughput in the given unit.
func (r Result) Rate(u Unit) float64 {
	if u == Ops {
		return r.OpsPerSec
	}
	return r.EventsPerSec
}

// Live is a measurement's progress, updated at every timeline step; it is
// safe to read from any goroutine.
type Live struct {
	ops, events atomic.Int64
	start       atomic.Int64 // unix nanoseconds; 0 before the clock starts
}

// Ops returns the ops done so far.
func (l *Live) Ops() int64 { return l.ops.Load() }

// Events returns the events moved so far.
func (l *Live) Events() int64 { return l.events.Load() }

// Elapsed returns the time since the clock started; 0 before.
func (l *Live) Elapsed() time.Duration {
	if s := l.start.Load(); s != 0 {
		return time.Since(time.Unix(0, s))
	}
	return 0
}

// recorder holds one worker's histograms.
type recorder struct {
	mu     sync.Mutex
	total  *hdrhistogram.Histogram
	window *hdrhistogram.Histogram
	ops    int64 // in the window
	events int64 // in the window
}

func (r *recorder) record(d time.Duration, events int) {
	r.mu.Lock()
	_ = r.total.RecordValue(int64(d))
	_ = r.window.RecordValue(int64(d))
	r.ops++
	r.events += int64(events)
	r.mu.Unlock()
}

// Measure runs newOp's ops on workers goroutines within the limits and
// records their latencies. Ops are handed out one at a time from a shared
// budget. Measure returns when the budget is spent, the time limit passed,
// the context ended (the result then says interrupted and the error is nil)
// or an op failed (the error says which op, and the result holds what ran
// before). live, when not nil, is kept up to date.
func Measure(ctx context.Context, workers int, newOp func(worker int) Op, lim Limits, live *Live) (Result, error) {
	if workers < 1 || lim.Ops < 1 {
		return Result{}, fmt.Errorf("measure %d ops on %d workers: %w", lim.Ops, workers, varve.ErrInvalidArgument)
	}
	if live == nil {
		live = new(Live)
	}
	ops := make([]Op, workers)
	recs := make([]*recorder, workers)
	for w := range workers {
		ops[w] = newOp(w)
		recs[w] = &recorder{
			total:  hdrhistogram.New(lowest, highest, 3),
			window: hdrhistogram.New(lowest, highest, 2),
		}
	}

	var (
		next     atomic.Int64
		stop     atomic.Bool
		stopOnce sync.Once
		stopped  = StopBudget
		errMu    sync.Mutex
		firstErr error
	)
	halt := func(why string) {
		stopOnce.Do(func() { stopped = why; stop.Store(true) })
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(ctx, func() { halt(StopInterrupted) })()

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	live.start.Store(start.UnixNano())
	if lim.Duration > 0 {
		t := time.AfterFunc(lim.Duration, func() { halt(StopDuration) })
		defer t.Stop()
	}

	sampler := newSampler(recs, start, live)
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		sampler.run(runCtx)
	}()

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			op, rec := ops[w], recs[w]
			for !stop.Load() {
				if next.Add(1) > int64(lim.Ops) {
					return
				}
				t0 := time.Now()
				n, err := op(runCtx)
				d := time.Since(t0)
				if err != nil {
					if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
						halt(StopInterrupted)
						return
					}
					errMu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("worker %d: %w", w, err)
					}
					errMu.Unlock()
					halt(StopError)
					return
				}
				rec.record(d, n)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	halt(StopBudget) // a no-op unless the budget ran out; orders the read of stopped
	runtime.ReadMemStats(&m1)
	cancel()
	<-samplerDone
	sampler.sample(start.Add(elapsed))

	res := Result{Elapsed: elapsed, Stopped: stopped, Timeline: sampler.points}
	total := hdrhistogram.New(lowest, highest, 3)
	for _, r := range recs {
		total.Merge(r.total)
	}
	res.Ops = total.TotalCount()
	for _, p := range sampler.points {
		res.Events += p.Events
	}
	if s := elapsed.Seconds(); s > 0 {
		res.OpsPerSec = float64(res.Ops) / s
		res.EventsPerSec = float64(res.Events) / s
	}
	if res.Ops > 0 {
		res.Latency = summarize(total)
		res.AllocsPerOp = float64(m1.Mallocs-m0.Mallocs) / float64(res.Ops)
		res.BytesPerOp = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(res.Ops)
	}
	if firstErr != nil {
		return res, firstErr
	}
	return res, nil
}

func summarize(h *hdrhistogram.Histogram) Latency {
	q := func(p float64) time.Duration { return time.Duration(h.ValueAtQuantile(p)) }
	return Latency{
		P50: q(50), P90: q(90), P99: q(99), P999: q(99.9),
		Max: time.Duration(h.Max()), Mean: time.Duration(math.Round(h.Mean())),
	}
}

// sampler turns the workers' window histograms into timeline points.
type sampler struct {
	recs   []*recorder
	start  time.Time
	live   *Live
	merged *hdrhistogram.Histogram
	points []Point
}

func newSampler(recs []*recorder, start time.Time, live *Live) *sampler {
	return &sampler{recs: recs, start: start, live: live, merged: hdrhistogram.New(lowest, highest, 2)}
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(TimelineStep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.sample(now)
		}
	}
}

func (s *sampler) sample(now time.Time) {
	s.merged.Reset()
	var p Point
	for _, r := range s.recs {
		r.mu.Lock()
		s.merged.Merge(r.window)
		r.window.Reset()
		p.Ops += r.ops
		p.Events += r.events
		r.ops, r.events = 0, 0
		r.mu.Unlock()
	}
	p.At = now.Sub(s.start)
	if p.Ops > 0 {
		p.P50 = time.Duration(s.merged.ValueAtQuantile(50))
		p.P99 = time.Duration(s.merged.ValueAtQuantile(99))
		p.Max = time.Duration(s.merged.Max())
	}
	s.live.ops.Add(p.Ops)
	s.live.events.Add(p.Events)
	s.points = append(s.points, p)
	if len(s.points) > maxPoints {
		s.points = thin(s.points)
	}
}

// thin merges neighbouring points, as Point describes.
func thin(ps []Point) []Point {
	out := ps[:0]
	for i := 0; i < len(ps); i += 2 {
		a := ps[i]
		if i+1 < len(ps) {
			b := ps[i+1]
			m := Point{At: b.At, Ops: a.Ops + b.Ops, Events: a.Events + b.Events,
				P99: max(a.P99, b.P99), Max: max(a.Max, b.Max)}
			if m.Ops > 0 {
				m.P50 = time.Duration((float64(a.P50)*float64(a.Ops) + float64(b.P50)*float64(b.Ops)) / float64(m.Ops))
			}
			a = m
		}
		out = append(out, a)
	}
	return out
}

// Run sets w up on s and measures a budget of units (events or ops, as
// w.Unit says) within duration d (no limit when d is 0).
func Run(ctx context.Context, s *varve.Store, w Workload, p Params, units int, d time.Duration, live *Live) (Result, error) {
	p.Events = units
	prep, err := w.Setup(ctx, s, p)
	if err != nil {
		return Result{}, fmt.Errorf("set up %s: %w", w.Name, err)
	}
	res, err := Measure(ctx, w.Workers, prep.NewOp, Limits{Ops: prep.Ops(units), Duration: d}, live)
	if err != nil {
		return res, fmt.Errorf("%s: %w", w.Name, err)
	}
	return res, nil
}

// Round rounds d to three significant digits, for printing: 81.264639ms
// becomes 81.3ms.
func Round(d time.Duration) time.Duration {
	if d < 1000 && d > -1000 {
		return d
	}
	m := time.Duration(1)
	for a := d; a >= 1000 || a <= -1000; a /= 10 {
		m *= 10
	}
	return d.Round(m)
}
