package soakcore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
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

// StopDuration is the stop reason of a run that ran its whole duration.
const StopDuration = "duration reached"

// Config configures a run of the workload. Every count must be positive;
// nothing is replaced by a default.
type Config struct {
	Mode        string
	Duration    time.Duration
	MemoryLimit int64 // bytes, set with debug.SetMemoryLimit for the run; 0 leaves it alone
	PruneAbove  int   // live events above which the oldest streams are deleted
	Workers     int
	// Rate caps the commands per second over all workers; 0 runs flat out.
	Rate       int
	Aggregates int           // accounts the commands pick from
	Interval   time.Duration // memory sampling interval
	// Sample, when set, is called with every sample the monitor takes
	// during the run and the counts at that moment.
	Sample func(MemSample, Counts)
	// OnOp, when set, is called after every command (tests leak with it).
	OnOp func()
}

// Validate reports a config that cannot run, wrapping
// varve.ErrInvalidArgument.
func (c Config) Validate() error {
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
	case c.Rate < 0 || c.MemoryLimit < 0:
		return bad("negative rate or memory limit")
	}
	return nil
}

// Counts are a run's counters at one moment.
type Counts struct {
	Ops        int64 `json:"ops"`
	Conflicts  int64 `json:"conflicts"`
	Errors     int64 `json:"errors"`
	Appended   int64 `json:"events_appended"`
	CaughtUp   int64 `json:"events_caught_up"`
	Pruned     int64 `json:"streams_pruned"`
	LiveEvents int64 `json:"live_events"`
	Reads      int64 `json:"stream_reads"`
}

// Result is what a run did.
type Result struct {
	Counts
	Elapsed    time.Duration
	StopReason string
	// Interrupted is set when the caller's context ended the run.
	Interrupted bool
	FirstError  string
	Samples     []MemSample
	// Latency holds the latency of every command (load, decide, save), in
	// nanoseconds, waits for the rate cap excluded.
	Latency *hdrhistogram.Histogram
}

// NewHistogram returns an HDR histogram of durations from 1 ns to 10
// minutes with three significant digits.
func NewHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(10*time.Minute), 3) }

// run is one run's shared state.
type run struct {
	cfg      Config
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
	limit    *rate.Limiter
	hists    []*hdrhistogram.Histogram // one per worker
}

func (k *run) fail(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	k.errs.Add(1)
	msg := err.Error()
	k.firstErr.CompareAndSwap(nil, &msg)
}

func (k *run) counts() Counts {
	c := Counts{Ops: k.ops.Load(), Conflicts: k.conflict.Load(), Errors: k.errs.Load(), Appended: k.appended.Load(),
		CaughtUp: k.caught.Load(), Pruned: k.pruned.Load(), Reads: k.reads.Load()}
	for i := range k.live {
		c.LiveEvents += k.live[i].Load()
	}
	return c
}

// Run runs the workload on s (commands on accounts: load, modify, save;
// stream reads; a $all follower; pruning in sustained mode) for
// cfg.Duration while a monitor samples memory every cfg.Interval. In
// discovery mode with a memory limit it stops once the live heap reaches
// 90% of the limit. The goroutines it starts end before it returns. The
// error is ctx's cause when ctx ended the run; the result is filled in
// either way.
func Run(ctx context.Context, s *varve.Store, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.MemoryLimit > 0 {
		old := debug.SetMemoryLimit(cfg.MemoryLimit)
		defer debug.SetMemoryLimit(old)
	}
	k := &run{cfg: cfg, s: s, names: make([]string, cfg.Aggregates), live: make([]atomic.Int64, cfg.Aggregates)}
	if cfg.Rate > 0 {
		k.limit = rate.NewLimiter(rate.Limit(cfg.Rate), max(1, cfg.Rate/100))
	}
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range k.names {
		k.names[i] = "soak-" + id + "-acct-" + strconv.Itoa(i)
	}
	k.hists = make([]*hdrhistogram.Histogram, cfg.Workers)
	for i := range k.hists {
		k.hists[i] = NewHistogram()
	}

	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	res := Result{StopReason: StopDuration}
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
	var stoppedAt time.Duration // the sample that reached the limit; Monitor calls back on this goroutine
	res.Samples = Monitor(runCtx, cfg.Interval, k.ops.Load, func(m MemSample) {
		if cfg.Sample != nil {
			cfg.Sample(m, k.counts())
		}
		if cfg.Mode == Discovery && cfg.MemoryLimit > 0 && m.HeapLive >= uint64(cfg.MemoryLimit)*9/10 && stopReason.Load() == nil {
			r := fmt.Sprintf("live heap %s reached 90%% of the memory limit %s after %s", MiB(m.HeapLive), MiB(uint64(cfg.MemoryLimit)), m.At.Round(time.Second))
			stopReason.Store(&r)
			stoppedAt = m.At
			stop()
		}
	})
	// A discovery run that reached the limit ends at that sample: the
	// monitor's last one, taken after the stop, may find the heap already
	// collected, and would report a ceiling below the limit.
	for stopReason.Load() != nil && len(res.Samples) > 1 && res.Samples[len(res.Samples)-1].At > stoppedAt {
		res.Samples = res.Samples[:len(res.Samples)-1]
	}
	wg.Wait()
	res.Elapsed = time.Since(began)
	if r := stopReason.Load(); r != nil {
		res.StopReason = *r
	} else if ctx.Err() != nil {
		res.StopReason = "interrupted"
		res.Interrupted = true
	}
	res.Counts = k.counts()
	if e := k.firstErr.Load(); e != nil {
		res.FirstError = *e
	}
	res.Latency = k.hists[0]
	for _, o := range k.hists[1:] {
		res.Latency.Merge(o)
	}
	if res.Interrupted {
		return res, fmt.Errorf("soak interrupted: %w", context.Cause(ctx))
	}
	return res, nil
}

// MiB formats bytes in MiB.
func MiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// worker runs commands: load an account (read its stream), decide, save the
// new event at the loaded version; every tenth command also reads the tail
// of another stream.
func (k *run) worker(ctx context.Context, seed uint64) {
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
		if k.cfg.OnOp != nil {
			k.cfg.OnOp()
		}
	}
}

// follow catches up on $all and tails it, waking on commits where the
// backend can tell.
func (k *run) follow(ctx context.Context) {
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
func (k *run) prune(ctx context.Context) {
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
