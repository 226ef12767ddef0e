package delivery

import (
	"context"
	"sync"
	"time"
)

// worker runs attempts, one at a time. Its context lives across attempts
// and is replaced only after the watchdog cancelled it, so that bounding an
// attempt costs no timer and no context of its own.
type worker struct {
	base   context.Context
	mu     sync.Mutex
	began  time.Time // start of the running attempt; zero when idle
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// begin returns the context of a new attempt.
func (w *worker) begin() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil || w.ctx.Err() != nil {
		w.ctx, w.cancel = context.WithCancelCause(w.base)
	}
	w.began = time.Now()
	return w.ctx
}

func (w *worker) end() {
	w.mu.Lock()
	w.began = time.Time{}
	w.mu.Unlock()
}

// expire cancels the running attempt with cause if it began before before.
func (w *worker) expire(before time.Time, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.began.IsZero() && w.began.Before(before) {
		w.cancel(cause)
	}
}

// watchdogTick is how often attempts are checked against a timeout: an
// attempt is cancelled between timeout and timeout plus one tick.
func watchdogTick(timeout time.Duration) time.Duration {
	return min(max(timeout/8, 5*time.Millisecond), time.Second)
}
