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

// SoakConfig configures a soak run.
type SoakConfig struct {
	Store       string
	Mode        string
	Duration    time.Duration
	MemoryLimit int64 // bytes, set with debug.SetMemoryLimit; 0 leaves it alone
	PruneAbove  int   // live events above which the oldest streams are deleted
	Workers     int
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
	Progress io.Writer

	onOp func() // tests use it to leak on purpose
}

// SoakReport is the result of a soak run.
type SoakReport struct {
	Store        string      `json:"store"`
	Mode         string      `json:"mode"`
	Duration     string      `json:"duration"`
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
}

func (c *SoakConfig) defaults() error {
	if c.Mode == "" {
		c.Mode = Sustained
	}
	if c.Mode != Sustained && c.Mode != Discovery {
		return fmt.Errorf("soak: mode %q: want %s or %s: %w", c.Mode, Sustained, Discovery, varve.ErrInvalidArgument)
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Aggregates <= 0 {
		c.Aggregates = 1000
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.PruneAbove <= 0 {
		c.PruneAbove = 20_000
	}
	if c.ThresholdPct <= 0 {
		c.ThresholdPct = 1
	}
	if c.Duration <= 0 {
		return fmt.Errorf("soak: duration must be positive: %w", varve.ErrInvalidArgument)
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
	if err := cfg.defaults(); err != nil {
		return SoakReport{}, err
	}
	rep := SoakReport{Store: Redact(cfg.Store), Mode: cfg.Mode, Duration: cfg.Duration.String(), MemoryLimit: cfg.MemoryLimit, PruneAbove: cfg.PruneAbove, Machine: Machine()}
	if cfg.MemoryLimit > 0 {
		old := debug.SetMemoryLimit(cfg.MemoryLimit)
		defer debug.SetMemoryLimit(old)
	}
	urls, removeTemp, err := ExpandTemp(cfg.Store)
	defer removeTemp()
	if err != nil {
		return rep, err
	}
	s, err := Open(ctx, urls[0])
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

	ctx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	rep.StopReason = "duration reached"
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Go(func() { k.worker(ctx, uint64(w)) })
	}
	wg.Go(func() { k.follow(ctx) })
	if cfg.Mode == Sustained {
		wg.Go(func() { k.prune(ctx) })
	}
	var stopReason atomic.Pointer[string]
	rep.Samples = Monitor(ctx, cfg.Interval, k.ops.Load, func(m MemSample) {
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
	if r := stopReason.Load(); r != nil {
		rep.StopReason = *r
	} else if parent := context.Cause(ctx); parent != nil && !errors.Is(parent, context.DeadlineExceeded) {
		rep.StopReason = "interrupted"
	}
	rep.Ops, rep.Conflicts, rep.Errors = k.ops.Load(), k.conflict.Load(), k.errs.Load()
	rep.Appended, rep.CaughtUp, rep.Pruned, rep.StreamsReads = k.appended.Load(), k.caught.Load(), k.pruned.Load(), k.reads.Load()
	for i := range k.live {
		rep.LiveEvents += k.live[i].Load()
	}
	if e := k.firstErr.Load(); e != nil {
		rep.FirstError = *e
	}
	rep.Verdict = Judge(rep.Samples, cfg.ThresholdPct, cfg.MinSlope)
	if rep.Errors > 0 {
		rep.Verdict.Flat = false
	}
	return rep, nil
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
		k.ops.Add(1)
		if k.cfg.onOp != nil {
			k.cfg.onOp()
		}
	}
}

// follow catches up on $all and tails it, waking on commits where the
// backend can tell.
func (k *soak) follow(ctx context.Context) {
	w, _ := k.s.Backend().(varve.Watcher)
	pos, err := k.s.LastPosition(ctx)
	if err != nil {
		k.fail(err)
		return
	}
	var buf []varve.RecordedEvent
	for ctx.Err() == nil {
		var wake <-chan struct{}
		if w != nil && k.s.Features().Watch {
			wake = w.Watch()
		}
		page, err := k.s.ReadAllPage(ctx, pos, 256, buf[:0])
		if err != nil {
			k.fail(err)
			return
		}
		buf = page
		if len(page) > 0 {
			pos = page[len(page)-1].Position
			k.caught.Add(int64(len(page)))
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

// PrintSoak writes the final table (seed 003's metrics) and the verdict.
func PrintSoak(w io.Writer, rep SoakReport) error {
	if len(rep.Samples) == 0 {
		return nil
	}
	first, last := rep.Samples[0], rep.Samples[len(rep.Samples)-1]
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Store\t%s (%s mode)\n", rep.Store, rep.Mode)
	fmt.Fprintf(tw, "Run\t%s, stopped: %s\n", last.At.Round(time.Second), rep.StopReason)
	fmt.Fprintf(tw, "Operations\t%d (%.0f ops/s), %d conflicts, %d errors\n", rep.Ops, float64(rep.Ops)/last.At.Seconds(), rep.Conflicts, rep.Errors)
	fmt.Fprintf(tw, "Events\t%d appended, %d caught up by the $all follower, %d live at the end, %d streams pruned\n", rep.Appended, rep.CaughtUp, rep.LiveEvents, rep.Pruned)
	fmt.Fprintf(tw, "Final Alloc\t%s (live heap %s)\n", MiB(last.HeapAlloc), MiB(last.HeapLive))
	fmt.Fprintf(tw, "Total Alloc\t%s (%.1f MiB/s)\n", MiB(last.TotalAlloc-first.TotalAlloc), float64(last.TotalAlloc-first.TotalAlloc)/(1<<20)/last.At.Seconds())
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
	for _, t := range rep.Verdict.Trends {
		flag := "ok"
		if t.ExceedsThresh {
			flag = "GROWING"
		}
		fmt.Fprintf(w, "trend %-9s mean %s, slope %+.1f KiB/min = %+.2f%% of mean per 10 min (threshold %.2f%%): %s\n",
			t.Name, MiB(uint64(t.Mean)), t.SlopePerMin/1024, t.PctPer10Min, t.ThresholdPct, flag)
	}
	verdict := "FLAT: memory stayed flat over the second half of the run"
	if !rep.Verdict.Flat {
		verdict = "NOT FLAT: see the trends above"
		if rep.Verdict.GoroutineGrowth {
			verdict += fmt.Sprintf("; goroutines grew from %d to %d", rep.Verdict.GoroutinesMid, rep.Verdict.GoroutinesEnd)
		}
		if rep.Errors > 0 {
			verdict += fmt.Sprintf("; %d errors", rep.Errors)
		}
		if rep.Verdict.SamplesEvaluated < 3 {
			verdict += "; too few samples to judge"
		}
	}
	_, err := fmt.Fprintln(w, "verdict:", verdict)
	return err
}
