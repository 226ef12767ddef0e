package delivery

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/backoff"
)

// readBackoff spaces the reads of the subscription after a failed one
// (one that Run does not give up on: not a closed store).
var readBackoff = backoff.Exponential{Initial: 10 * time.Millisecond, Max: 5 * time.Second}

// reader feeds the coordinator with the subscription's events.
func (d *Dispatcher) reader(ctx context.Context, feed chan<- feedBatch, readErr chan<- error) {
	var seq uint64
	prev := d.sub.Position()
	own := d.parked.Stream()
	failures := 0
	for {
		b, err := d.sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, varve.ErrClosed) || errors.Is(err, varve.ErrInvalidArgument) {
				readErr <- err
				return
			}
			failures++
			wait := readBackoff.Delay(failures)
			d.log.Warn("delivery: read failed, retrying", "err", err, "in", wait)
			if backoff.Sleep(ctx, wait) != nil {
				return
			}
			continue
		}
		failures = 0
		items := make([]*item, 0, len(b.Events))
		for i := range b.Events {
			if b.Events[i].Stream == own {
				prev = b.Events[i].Position
				continue // never deliver our own parked records (SystemStreams)
			}
			items = append(items, &item{ev: b.Events[i], seq: seq, prev: prev})
			seq++
			prev = b.Events[i].Position
		}
		prev = b.Through
		select {
		case feed <- feedBatch{items: items, through: b.Through}:
		case <-ctx.Done():
			return
		}
	}
}

// job is what a worker gets: an item, which the worker only reads, and the
// number of the attempt.
type job struct {
	it      *item
	attempt int
}

// attempt runs one job: a delivery or a park. It runs on a worker.
func (d *Dispatcher) attempt(ctx context.Context, j job) (r result) {
	it := j.it
	r.it = it
	defer func() {
		if p := recover(); p != nil {
			r.err = fmt.Errorf("delivery: sink panicked: %v\n%s", p, debug.Stack())
		}
	}()
	if it.park {
		r.version, r.err = d.parked.Park(ctx, it.record)
		return r
	}
	ev := it.ev
	if d.opens {
		// Opened at each attempt: a retry after an erasure sends the
		// erased marker, never the plaintext.
		evs := [1]varve.RecordedEvent{ev}
		if r.err = d.store.Open(ctx, evs[:]); r.err != nil {
			return r
		}
		ev = evs[0]
	}
	r.err = d.sink.Deliver(ctx, Delivery{
		Subscription: d.sub.Name(), Event: ev, Attempt: j.attempt, Key: Key(d.sub.Name(), ev.Position),
	})
	if r.err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errAttemptTimeout) {
			r.err = fmt.Errorf("%w: %w", cause, r.err)
		}
	}
	return r
}

// maintain saves the checkpoint periodically and learns which parked streams
// were resolved.
func (d *Dispatcher) maintain(ctx context.Context, st *parkedState, ws []*worker, unblocks chan<- unblock, stop <-chan struct{}) {
	cpTick := time.NewTicker(d.cfg.CheckpointInterval)
	defer cpTick.Stop()
	var watchdog <-chan time.Time
	if d.cfg.AttemptTimeout > 0 {
		t := time.NewTicker(watchdogTick(d.cfg.AttemptTimeout))
		defer t.Stop()
		watchdog = t.C
	}
	timeout := fmt.Errorf("%w after %v", errAttemptTimeout, d.cfg.AttemptTimeout)
	parkTick := time.NewTicker(d.cfg.ParkedPollInterval)
	defer parkTick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-watchdog:
			for _, w := range ws {
				w.expire(now.Add(-d.cfg.AttemptTimeout), timeout)
			}
		case <-cpTick.C:
			sctx, cancel := context.WithTimeout(ctx, max(d.cfg.CheckpointInterval, minSaveTimeout))
			if err := d.flush(sctx); err != nil {
				d.log.Warn("delivery: save checkpoint failed, retrying at the next tick", "err", err)
			}
			cancel()
		case <-parkTick.C:
			if d.cfg.Ordering != PerStream {
				continue
			}
			st.touched = map[string]bool{}
			if err := d.parked.load(ctx, st); err != nil {
				d.log.Warn("delivery: poll of the parked stream failed", "err", err)
				continue
			}
			for stream := range st.touched {
				if st.perStream[stream] > 0 {
					continue
				}
				select {
				case unblocks <- unblock{stream: stream, version: st.version}:
				case <-stop:
					return
				}
			}
		}
	}
}
