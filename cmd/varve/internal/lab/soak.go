package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/time/rate"

	"github.com/varve-go/varve"
)

// Soak modes.
const (
	// Sustained prunes the oldest streams above a threshold so the data set
	// reaches a steady state; memory must stay flat.
	Sustained = "sustained"
	// Discovery never prunes and runs until the live heap reaches 90% of the
	// memory limit (or the duration ends), reporting where it stopped.
	Discovery = "discovery"
)

// SoakConfig configures a soak run. Every count must be positive; nothing
// is replaced by a default.
type SoakConfig struct {
	// Store is the URL of the store to open, Label its name in reports.
	Store, Label string
	Mode         string
	Duration     time.Duration
	MemoryLimit  int64 // bytes, set with debug.SetMemoryLimit; 0 leaves it alone
	PruneAbove   int   // live events above which the oldest streams are deleted
	Workers      int
	// Rate caps the commands per second over all workers; 0 runs flat out.
	Rate       int
	Aggregates int           // accounts the commands pick from
	Interval   time.Duration // memory sampling interval
	// ThresholdPct flags a memory figure whose slope over the second half of
	// the run, projected over 10 minutes, exceeds this percent of its mean.
	ThresholdPct float64
	// MinSlope is the growth in bytes per minute below which nothing is
	// flagged, whatever its share of the mean.
	MinSlope float64
	// MinSpan is the least time the judged second half of the run must
	// cover for a verdict; shorter runs are "insufficient data". 0 means
	// DefaultMinSpan.
	MinSpan  time.Duration
	Progress io.Writer

	onOp func() // tests use it to leak on purpose
}

// DefaultMinSpan is the least span of samples a verdict is drawn from: a
// slope projected over 10 minutes from seconds of samples is noise.
const DefaultMinSpan = time.Minute

// SoakReport is the result of a soak run.
type SoakReport struct {
	Store    string        `json:"store"`
	Mode     string        `json:"mode"`
	Duration time.Duration `json:"duration_ns"`
	Rate     int           `json:"rate"`
	Workers  int           `json:"workers"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	// Latency is the latency of one command (load, decide, save), waits
	// for the rate cap excluded.
	Latency      Latency     `json:"latency"`
	MemoryLimit  int64       `json:"memory_limit"`
	PruneAbove   int         `json:"prune_above"`
	Machine      MachineInfo `json:"machine"`
	Ops          int64       `json:"ops"`
	Conflicts    int64       `json:"conflicts"`
	Errors       int64       `json:"errors"`
	FirstError   string      `json:"first_error,omitempty"`
	Appended     int64       `json:"events_appended"`
	CaughtUp     int64       `json:"events_caught_up"`
	Pruned       int64       `json:"streams_pruned"`
	LiveEvents   int64       `json:"live_events_at_end"`
	StopReason   string      `json:"stop_reason"`
	Samples      []MemSample `json:"samples"`
	Verdict      Verdict     `json:"verdict"`
	StreamsReads int64       `json:"stream_reads"`
	Interrupted  bool        `json:"interrupted"`
}

func (c *SoakConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("soak: %s: %w", fmt.Sprintf(format, args...), varve.ErrInvalidArgument)
	}
	switch {
	case c.Mode != Sustained && c.Mode != Discovery:
		return bad("mode %q: want %s or %s", c.Mode, Sustained, Discovery)
	case c.Duration <= 0:
		return bad("duration %v: want a positive duration", c.Duration)
	case c.Workers <= 0:
		return bad("workers %d: want at least 1", c.Workers)
	case c.Aggregates <= 0:
		return bad("aggregates %d: want at least 1", c.Aggregates)
	case c.Interval <= 0:
		return bad("interval %v: want a positive duration", c.Interval)
	case c.Mode == Sustained && c.PruneAbove <= 0:
		return bad("prune-above %d: want at least 1", c.PruneAbove)
	case c.ThresholdPct < 0 || c.MinSlope < 0 || c.Rate < 0 || c.MemoryLimit < 0 || c.MinSpan < 0:
		return bad("negative threshold, min-slope, rate, memory limit or min-span")
	}
	if c.MinSpan == 0 {
		c.MinSpan = DefaultMinSpan
	}
	return nil
}

// soak is one run's shared state.
type soak struct {
	cfg      SoakConfig
	s        *varve.Store
	names    []string
	live     []atomic.Int64 // live events per account stream
	ops      atomic.Int64
	conflict atomic.Int64
	errs     atomic.Int64
	appended atomic.Int64
	reads    atomic.Int64
	caught   atomic.Int64
	pruned   atomic.Int64
	firstErr atomic.Pointer[string]
	lastOps  atomic.Int64 // ops at the previous progress line
	limit    *rate.Limiter
	hists    []*hdrhistogram.Histogram // one per worker
}

func (k *soak) fail(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	k.errs.Add(1)
	msg := err.Error()
	k.firstErr.CompareAndSwap(nil, &msg)
}

// RunSoak runs a sustained workload (commands on accounts: load, modify,
// save; stream reads; a $all follower; pruning in sustained mode) while a
// monitor samples memory, and judges whether memory stayed flat.
func RunSoak(ctx context.Context, cfg SoakConfig) (SoakReport, error) {
	rep := SoakReport{Store: cfg.Label, Mode: cfg.Mode, Duration: cfg.Duration, Rate: cfg.Rate, Workers: cfg.Workers,
		MemoryLimit: cfg.MemoryLimit, PruneAbove: cfg.PruneAbove, Machine: Machine()}
	if rep.Store == "" {
		rep.Store = Redact(cfg.Store)
	}
	if err := cfg.validate(); err != nil {
		return rep, err
	}
	if cfg.MemoryLimit > 0 {
		old := debug.SetMemoryLimit(cfg.MemoryLimit)
		defer debug.SetMemoryLimit(old)
	}
	s, err := Open(ctx, cfg.Store)
	if err != nil {
		return rep, err
	}
	defer s.Close()
	k := &soak{cfg: cfg, s: s, names: make([]string, cfg.Aggregates), live: make([]atomic.Int64, cfg.Aggregates)}
	if cfg.Rate > 0 {
		k.limit = rate.NewLimiter(rate.Limit(cfg.Rate), max(1, cfg.Rate/100))
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range k.names {
		k.names[i] = "soak-" + run + "-acct-" + strconv.Itoa(i)
	}
	k.hists = make([]*hdrhistogram.Histogram, cfg.Workers)
	for i := range k.hists {
		k.hists[i] = NewHistogram()
	}

	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	rep.StopReason = "duration reached"
	began := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Go(func() { k.worker(runCtx, uint64(w)) })
	}
	wg.Go(func() { k.follow(runCtx) })
	if cfg.Mode == Sustained {
		wg.Go(func() { k.prune(runCtx) })
	}
	var stopReason atomic.Pointer[string]
	rep.Samples = Monitor(runCtx, cfg.Interval, k.ops.Load, func(m MemSample) {
		if cfg.Progress != nil {
			printSample(cfg.Progress, m, cfg.Interval, k)
		}
		if cfg.Mode == Discovery && cfg.MemoryLimit > 0 && m.HeapLive >= uint64(cfg.MemoryLimit)*9/10 {
			r := fmt.Sprintf("live heap %s reached 90%% of the memory limit %s after %s", MiB(m.HeapLive), MiB(uint64(cfg.MemoryLimit)), m.At.Round(time.Second))
			stopReason.Store(&r)
			stop()
		}
	})
	wg.Wait()
	rep.Elapsed = time.Since(began)
	if r := stopReason.Load(); r != nil {
		rep.StopReason = *r
	} else if ctx.Err() != nil {
		rep.StopReason = "interrupted"
		rep.Interrupted = true
	}
	rep.Ops, rep.Conflicts, rep.Errors = k.ops.Load(), k.conflict.Load(), k.errs.Load()
	rep.Appended, rep.CaughtUp, rep.Pruned, rep.StreamsReads = k.appended.Load(), k.caught.Load(), k.pruned.Load(), k.reads.Load()
	for i := range k.live {
		rep.LiveEvents += k.live[i].Load()
	}
	if e := k.firstErr.Load(); e != nil {
		rep.FirstError = Scrub(*e)
	}
	h := k.hists[0]
	for _, o := range k.hists[1:] {
		h.Merge(o)
	}
	rep.Latency = LatencyOf(h)
	rep.Verdict = Judge(rep.Samples, cfg.ThresholdPct, cfg.MinSlope, cfg.MinSpan)
	if rep.Interrupted {
		return rep, fmt.Errorf("soak interrupted: %w", context.Cause(ctx))
	}
	return rep, nil
}

// SoakDetail is what a soak row holds beyond the shared fields.
type SoakDetail struct {
	Mode         string `json:"mode"`
	Conflicts    int64  `json:"conflicts"`
	Appended     int64  `json:"events_appended"`
	CaughtUp     int64  `json:"events_caught_up"`
	Pruned       int64  `json:"streams_pruned"`
	LiveEvents   int64  `json:"live_events_at_end"`
	StreamsReads int64  `json:"stream_reads"`
	StopReason   string `json:"stop_reason"`
	Verdict      string `json:"verdict"`
}

// Row returns the run's commands as a row.
func (rep SoakReport) Row() Row {
	stopped := "duration"
	switch {
	case rep.Interrupted:
		stopped = "interrupted"
	case rep.StopReason != "duration reached":
		stopped = "memory limit"
	}
	row := Row{Store: rep.Store, Name: "commands", Unit: "commands", Count: rep.Ops, Elapsed: rep.Elapsed, Latency: rep.Latency,
		Errors: rep.Errors, Stopped: stopped, Error: rep.FirstError,
		Detail: SoakDetail{Mode: rep.Mode, Conflicts: rep.Conflicts, Appended: rep.Appended, CaughtUp: rep.CaughtUp, Pruned: rep.Pruned,
			LiveEvents: rep.LiveEvents, StreamsReads: rep.StreamsReads, StopReason: rep.StopReason, Verdict: rep.Verdict.Status}}
	if s := rep.Elapsed.Seconds(); s > 0 {
		row.Rate = float64(rep.Ops) / s
	}
	return row
}

// SoakDetails is what soak's envelope holds beyond its row.
type SoakDetails struct {
	MemoryLimit int64       `json:"memory_limit"`
	PruneAbove  int         `json:"prune_above"`
	Verdict     Verdict     `json:"verdict"`
	Samples     []MemSample `json:"samples"`
}

// worker runs commands: load an account (read its stream), decide, save the
// new event at the loaded version; every tenth command also reads the tail
// of another stream.
func (k *soak) worker(ctx context.Context, seed uint64) {
	r := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	data := make([]byte, 64)
	for ctx.Err() == nil {
		if k.limit != nil && k.limit.Wait(ctx) != nil {
			return
		}
		t0 := time.Now()
		i := r.IntN(len(k.names))
		var balance int64
		var version varve.Version
		for e, err := range k.s.ReadStream(ctx, k.names[i]) {
			if errors.Is(err, varve.ErrStreamNotFound) {
				break
			}
			if err != nil {
				k.fail(err)
				break
			}
			if len(e.Data) >= 8 {
				balance += int64(binary.LittleEndian.Uint64(e.Data))
			}
			version = e.Version
		}
		amount := int64(r.IntN(100)) - 40
		if balance+amount < 0 {
			amount = -amount
		}
		binary.LittleEndian.PutUint64(data, uint64(amount))
		_, err := k.s.Append(ctx, k.names[i], varve.Exact(version), varve.Event{Type: "Deposited", Data: data})
		switch {
		case err == nil:
			k.appended.Add(1)
			k.live[i].Add(1)
		case errors.Is(err, varve.ErrWrongExpectedVersion):
			k.conflict.Add(1)
		default:
			k.fail(err)
		}
		if r.IntN(10) == 0 {
			for _, err := range k.s.ReadStream(ctx, k.names[r.IntN(len(k.names))], varve.ReadBackward(), varve.Limit(10)) {
				if err != nil && !errors.Is(err, varve.ErrStreamNotFound) {
					k.fail(err)
				}
			}
			k.reads.Add(1)
		}
		if ctx.Err() == nil {
			_ = k.hists[seed].RecordValue(int64(time.Since(t0)))
		}
		k.ops.Add(1)
		if k.cfg.onOp != nil {
			k.cfg.onOp()
		}
	}
}

// follow catches up on $all and tails it, waking on commits where the
// backend can tell.
func (k *soak) follow(ctx context.Context) {
	pos, err := k.s.LastPosition(ctx)
	if err != nil {
		k.fail(err)
		return
	}
	var buf []varve.RecordedEvent
	for ctx.Err() == nil {
		wake := k.s.Watch()
		page, err := k.s.ReadAllPage(ctx, pos, buf[:0], varve.Limit(256))
		if err != nil {
			k.fail(err)
			return
		}
		buf = page.Events
		if len(buf) > 0 {
			pos = page.Through
			k.caught.Add(int64(len(buf)))
			continue
		}
		poll := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-poll.C:
		}
		poll.Stop()
	}
}

// prune keeps the data set in a steady state: whenever more than
// PruneAbove events are live it deletes account streams, oldest first in
// round-robin order, until 90% of the threshold remains (seed 003 prunes the
// oldest 10% the same way). A deleted account starts afresh at its next
// command.
func (k *soak) prune(ctx context.Context) {
	next := 0
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var live int64
		for i := range k.live {
			live += k.live[i].Load()
		}
		if live <= int64(k.cfg.PruneAbove) {
			continue
		}
		target := int64(k.cfg.PruneAbove) * 9 / 10
		for range len(k.names) {
			if live <= target || ctx.Err() != nil {
				break
			}
			err := k.s.Delete(ctx, k.names[next], varve.Any)
			switch {
			case err == nil:
				live -= k.live[next].Swap(0)
				k.pruned.Add(1)
			case errors.Is(err, varve.ErrStreamNotFound):
			default:
				k.fail(err)
			}
			next = (next + 1) % len(k.names)
		}
	}
}

func printSample(w io.Writer, m MemSample, interval time.Duration, k *soak) {
	fmt.Fprintf(w, "%7s | %8.0f ops/s | heap %9s (live %9s) | rss %9s | %3d goroutines | gc %5d | errors %d\n",
		m.At.Round(time.Second), float64(m.Ops-k.lastOps.Swap(m.Ops))/interval.Seconds(),
		MiB(m.HeapAlloc), MiB(m.HeapLive), MiB(m.RSS), m.Goroutines, m.NumGC, k.errs.Load())
}

// MiB formats bytes in MiB.
func MiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// PrintSoak writes the final table (memory, GC, goroutines) and the
// verdict.
func PrintSoak(w io.Writer, rep SoakReport) error {
	if len(rep.Samples) == 0 {
		_, err := fmt.Fprintf(w, "soak on %s: no samples (stopped: %s)\n", rep.Store, rep.StopReason)
		return err
	}
	first, last := rep.Samples[0], rep.Samples[len(rep.Samples)-1]
	secs := max(last.At.Seconds(), 1e-9)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Store\t%s (%s mode)\n", rep.Store, rep.Mode)
	fmt.Fprintf(tw, "Run\t%s, stopped: %s\n", last.At.Round(time.Millisecond), rep.StopReason)
	fmt.Fprintf(tw, "Commands\t%d (%.0f ops/s), %d conflicts, %d errors\n", rep.Ops, float64(rep.Ops)/secs, rep.Conflicts, rep.Errors)
	fmt.Fprintf(tw, "Latency\t%s\n", rep.Latency)
	fmt.Fprintf(tw, "Events\t%d appended, %d caught up by the $all follower, %d live at the end, %d streams pruned\n", rep.Appended, rep.CaughtUp, rep.LiveEvents, rep.Pruned)
	fmt.Fprintf(tw, "Final Alloc\t%s (live heap %s)\n", MiB(last.HeapAlloc), MiB(last.HeapLive))
	fmt.Fprintf(tw, "Total Alloc\t%s (%.1f MiB/s)\n", MiB(last.TotalAlloc-first.TotalAlloc), float64(last.TotalAlloc-first.TotalAlloc)/(1<<20)/secs)
	fmt.Fprintf(tw, "Heap Objects\t%d\n", last.HeapObjects)
	fmt.Fprintf(tw, "GC Cycles\t%d (pause total %s)\n", last.NumGC-first.NumGC, (last.PauseTotal - first.PauseTotal).Round(time.Microsecond))
	fmt.Fprintf(tw, "RSS\t%s (start %s)\n", MiB(last.RSS), MiB(first.RSS))
	fmt.Fprintf(tw, "Goroutines\t%d (start %d)\n", last.Goroutines, first.Goroutines)
	if rep.FirstError != "" {
		fmt.Fprintf(tw, "First error\t%s\n", rep.FirstError)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	v := rep.Verdict
	if v.Status == Insufficient {
		_, err := fmt.Fprintf(w, "verdict: INSUFFICIENT DATA: the second half of the run holds %d samples over %v; a verdict needs at least %d over %v (run longer with --duration)\n",
			v.SamplesEvaluated, v.Span.Round(time.Millisecond), MinJudgedSamples, v.MinSpan)
		return err
	}
	for _, t := range v.Trends {
		flag := "ok"
		if t.ExceedsThresh {
			flag = "GROWING"
		}
		fmt.Fprintf(w, "trend %-9s mean %s, slope %+.1f KiB/min = %+.2f%% of mean per 10 min (threshold %.2f%%): %s\n",
			t.Name, MiB(uint64(t.Mean)), t.SlopePerMin/1024, t.PctPer10Min, t.ThresholdPct, flag)
	}
	verdict := "FLAT: memory stayed flat over the second half of the run"
	if v.Status == Growing {
		verdict = "GROWING: see the trends above"
		if v.GoroutineGrowth {
			verdict += fmt.Sprintf("; goroutines grew from %d to %d", v.GoroutinesMid, v.GoroutinesEnd)
		}
	}
	_, err := fmt.Fprintln(w, "verdict:", verdict)
	return err
}
