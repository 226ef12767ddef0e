package lab

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/time/rate"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/workload"
)

// TimelineStep is the interval between two points of a timeline.
const TimelineStep = 250 * time.Millisecond

// maxPoints bounds a timeline: beyond it, neighbouring points are merged.
const maxPoints = 1200

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
func (r Result) Rate(u workload.Unit) float64 {
	if u == workload.Ops {
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

// Limits bound a measurement: a budget of ops, a time cap (none when 0)
// and a rate cap in ops per second over all workers (none when 0).
type Limits struct {
	Ops      int
	Duration time.Duration
	Rate     float64
}

// Measure runs newOp's ops on workers goroutines within the limits (see
// [workload.Drive]) and records their latencies in HDR histograms: one per
// worker for the whole run and one per worker for the current interval of
// the timeline, which a sampler goroutine owned by Measure folds into a
// [Point] every [TimelineStep] and publishes in live (when not nil) for
// progress displays. Under a rate cap an op first waits for its turn; the
// wait is not part of its latency. A failed op ends the measurement with an
// error that says which; the result holds what ran before.
func Measure(ctx context.Context, workers int, newOp func(worker int) workload.Op, lim Limits, live *Live) (Result, error) {
	if workers < 1 || lim.Ops < 1 || lim.Rate < 0 {
		return Result{}, fmt.Errorf("measure %d ops on %d workers at rate %g: %w", lim.Ops, workers, lim.Rate, varve.ErrInvalidArgument)
	}
	if live == nil {
		live = new(Live)
	}
	ops := make([]workload.Op, workers)
	recs := make([]*recorder, workers)
	waited := make([]time.Duration, workers) // each written and read by its worker only
	skipped := make([]bool, workers)
	pace := newPaced(ctx, lim.Rate, lim.Duration)
	defer pace.stop()
	for w := range workers {
		ops[w] = newOp(w)
		if pace != nil {
			op := ops[w]
			ops[w] = func(ctx context.Context) (int, error) {
				t := time.Now()
				ok, err := pace.wait()
				waited[w] = time.Since(t)
				if !ok {
					skipped[w] = true
					return 0, err
				}
				return op(ctx)
			}
		}
		recs[w] = &recorder{
			total:  NewHistogram(),
			window: hdrhistogram.New(lowest, highest, 2),
		}
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	var sampler *sampler
	samplerDone := make(chan struct{})
	elapsed, stopped, err := workload.Drive(ctx, ops, workload.Limits{Ops: lim.Ops, Duration: lim.Duration},
		func(w int, d time.Duration, n int) {
			if skipped[w] {
				skipped[w] = false
				return
			}
			recs[w].record(d-waited[w], n)
		},
		func(start time.Time) {
			live.start.Store(start.UnixNano())
			sampler = newSampler(recs, start, live)
			go func() {
				defer close(samplerDone)
				sampler.run(sampleCtx)
			}()
		})
	if sampler == nil { // Drive refused its arguments
		return Result{}, err
	}
	runtime.ReadMemStats(&m1)
	stopSampling()
	<-samplerDone
	sampler.sample(sampler.start.Add(elapsed))

	res := Result{Elapsed: elapsed, Stopped: stopped, Timeline: sampler.points}
	total := NewHistogram()
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
	res.Latency = LatencyOf(total)
	if res.Ops > 0 {
		res.AllocsPerOp = float64(m1.Mallocs-m0.Mallocs) / float64(res.Ops)
		res.BytesPerOp = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(res.Ops)
	}
	return res, err
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
// w.Unit says) within duration d (no limit when d is 0) at most rate ops
// per second (no cap when 0).
func Run(ctx context.Context, s *varve.Store, w workload.Workload, p workload.Params, units int, d time.Duration, rate float64, live *Live) (Result, error) {
	p.Events = units
	prep, err := w.Setup(ctx, s, p)
	if err != nil {
		return Result{}, fmt.Errorf("set up %s: %w", w.Name, err)
	}
	res, err := Measure(ctx, w.Workers, prep.NewOp, Limits{Ops: prep.Ops(units), Duration: d, Rate: rate}, live)
	if err != nil {
		return res, fmt.Errorf("%s: %w", w.Name, err)
	}
	return res, nil
}

// paced hands out turns at a rate over all workers. A wait ends without a
// turn when the time cap passes or ctx ends. A nil *paced (no rate cap)
// grants every turn at once.
type paced struct {
	lim    *rate.Limiter
	ctx    context.Context // ends at the time cap or with the parent
	cancel context.CancelFunc
	parent context.Context
}

// newPaced returns nil when perSec is 0: no cap.
func newPaced(parent context.Context, perSec float64, cap time.Duration) *paced {
	if perSec <= 0 {
		return nil
	}
	p := &paced{lim: rate.NewLimiter(rate.Limit(perSec), 1), parent: parent}
	if cap > 0 {
		p.ctx, p.cancel = context.WithTimeout(parent, cap)
	} else {
		p.ctx, p.cancel = context.WithCancel(parent)
	}
	return p
}

func (p *paced) stop() {
	if p != nil {
		p.cancel()
	}
}

// wait returns true when the op may run. Without a turn it returns the
// parent's error when the parent ended, so that the driver sees an
// interrupt, and nil at the time cap.
func (p *paced) wait() (bool, error) {
	if p == nil {
		return true, nil
	}
	if err := p.lim.Wait(p.ctx); err != nil {
		return false, p.parent.Err()
	}
	return true, nil
}
