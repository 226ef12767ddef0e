package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/varve-go/varve"
)

// Why a run stopped.
const (
	StopBudget      = "budget"      // every op of the budget ran
	StopDuration    = "duration"    // the time limit passed
	StopInterrupted = "interrupted" // the context ended
	StopError       = "error"       // an op failed
)

// Limits bound a run.
type Limits struct {
	// Ops is the op budget; at least 1.
	Ops int
	// Duration stops the run early when it is positive.
	Duration time.Duration
}

// Observer is told of every op that succeeded, on the goroutine of the
// worker that ran it: how long it took and how many events it moved.
type Observer func(worker int, took time.Duration, events int)

// Drive runs ops (one per worker, each on a goroutine of its own) within
// lim: ops are handed out one at a time from a shared budget. started, when
// not nil, is called with the start time just before the workers start.
// Drive returns when the budget is spent, the time limit passed, the
// context ended (stopped is StopInterrupted and the error nil) or an op
// failed (the error says which worker).
func Drive(ctx context.Context, ops []Op, lim Limits, observe Observer, started func(time.Time)) (elapsed time.Duration, stopped string, err error) {
	if len(ops) < 1 || lim.Ops < 1 {
		return 0, "", fmt.Errorf("drive %d ops on %d workers: %w", lim.Ops, len(ops), varve.ErrInvalidArgument)
	}
	var (
		next     atomic.Int64
		stop     atomic.Bool
		stopOnce sync.Once
		errMu    sync.Mutex
		firstErr error
	)
	stopped = StopBudget
	halt := func(why string) {
		stopOnce.Do(func() { stopped = why; stop.Store(true) })
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(ctx, func() { halt(StopInterrupted) })()

	start := time.Now()
	if started != nil {
		started(start)
	}
	if lim.Duration > 0 {
		t := time.AfterFunc(lim.Duration, func() { halt(StopDuration) })
		defer t.Stop()
	}
	var wg sync.WaitGroup
	for w, op := range ops {
		wg.Go(func() {
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
				if observe != nil {
					observe(w, d, n)
				}
			}
		})
	}
	wg.Wait()
	elapsed = time.Since(start)
	halt(StopBudget) // a no-op unless the budget ran out; orders the read of stopped
	return elapsed, stopped, firstErr
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
