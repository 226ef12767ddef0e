package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// engine follows the records of a workflow's instance streams in $all: the
// timers for FireDue and, for Run, also the commands not yet sent, the
// cancels and the retry requests. mine, when set, keeps the instance
// streams of a segment.
type engine[S any] struct {
	r     *Runner[S]
	mine  func(stream string) bool
	relay bool // follow commands, cancels and retry requests (Run)

	mu      sync.Mutex
	scanned varve.Position
	index   *timerIndex
	rescans int

	// unsent counts, per instance stream, the commands recorded and not
	// recorded as sent, within the index's budgets; past them overflow is
	// set, and once the streams held are relayed the records after
	// unsentFrom are read again.
	unsent      map[string]int
	unsentBytes int64
	overflow    bool
	unsentFrom  varve.Position
	onError     func(error)
}

// unsentOverhead approximates the bytes of one unsent entry besides its
// stream id.
const unsentOverhead = 64

func (r *Runner[S]) newEngine(mine func(string) bool, relay bool) *engine[S] {
	return &engine[S]{r: r, mine: mine, relay: relay, index: newTimerIndex(r.cfg.TimerIndexCount, r.cfg.TimerIndexBytes),
		unsent: map[string]int{}}
}

func (e *engine[S]) filter() varve.Filter {
	types := []string{TypeTimer, TypeTimerCancel}
	if e.relay {
		types = append(types, TypeOutbox, TypeSent, TypeCancelled, TypeRetryRequested)
	}
	return varve.Filter{Categories: []string{e.r.def.Name}, Types: types}
}

func (e *engine[S]) id(stream string) string {
	return stream[len(e.r.def.Name)+len(e.r.store.Config().CategorySeparator):]
}

// FireDue fires the due timers of this workflow: it reads the timer
// schedules and cancels appended to $all since its last call (waiting for
// through, the position of the last append the caller knows of, on stores
// with a horizon), then applies each due timer, earliest first, as an input
// with a deterministic id. When the index has let timers go (see [Config])
// and the first of them is due, it re-reads $all for them, as often as
// needed within the call. A timer whose instance fails (its records, or
// Decide) does not hold up the others: FireDue goes on, keeps it for the
// next call and returns the errors joined; a store error ends the call.
func (r *Runner[S]) FireDue(ctx context.Context, through varve.Position) (fired int, err error) {
	if err := r.store.WaitFor(ctx, through); err != nil {
		return 0, fmt.Errorf("workflow: wait for %v: %w", through, err)
	}
	return r.fire.fireDue(ctx)
}

func (e *engine[S]) fireDue(ctx context.Context) (fired int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.scan(ctx, e.scanned, varve.Start, nil); err != nil {
		return 0, err
	}
	r := e.r
	now := r.clock.Now()
	// Timers whose instance failed wait out of the index until the call
	// ends, as if fired, then go back in for the next call.
	var failed []*timerEntry
	var errs []error
	defer func() {
		for _, t := range failed {
			if _, ok := e.index.byName[timerName{t.stream, t.id}]; !ok { // else rescheduled meanwhile
				e.index.schedule(t.timerKey, t.after, nil)
			}
		}
	}()
	for {
		for {
			t := e.index.firstEntry()
			if t == nil || t.due.After(now) {
				break
			}
			id := e.id(t.stream)
			in := Input{ID: uuid.NewSHA1(ns, []byte(t.stream+"\x00timer\x00"+t.id)), Type: "workflow.timer-fired", Timer: t.id}
			applied, err := r.apply(ctx, id, in, now)
			if err != nil && !ofInstances(err) {
				return fired, errors.Join(append(errs, err)...)
			}
			if err != nil {
				errs = append(errs, err)
				failed = append(failed, t)
			}
			if applied {
				fired++
				if e.relay {
					e.send(ctx, t.stream)
				}
			}
			e.index.remove(timerName{t.stream, t.id})
		}
		if e.index.unbounded || e.index.limit.due.After(now) {
			return fired, errors.Join(errs...)
		}
		// Every timer read that sorts below the limit is handled: read
		// again, from the first timer let go, those at or above it, and
		// whatever came since.
		floor, floorPos, from := e.index.limit, e.scanned, e.index.from
		e.index.reset()
		e.rescans++
		if err := e.scan(ctx, from, floorPos, &floor); err != nil {
			return fired, err
		}
	}
}

// scan reads this workflow's records after from: timers into the index (a
// schedule at or before floorPos that sorts below floor is skipped) and,
// for Run, the other records after floorPos (read for the first time).
func (e *engine[S]) scan(ctx context.Context, from, floorPos varve.Position, floor *timerKey) error {
	after := from
	for ev, err := range e.r.store.ReadAll(ctx, from, e.filter()) {
		if err != nil {
			return fmt.Errorf("workflow: scan timers: %w", err)
		}
		if e.mine == nil || e.mine(ev.Stream) {
			if err := e.record(ctx, &ev, after, floorPos, floor); err != nil {
				return err
			}
		}
		after, e.scanned = ev.Position, ev.Position
	}
	return nil
}

func (e *engine[S]) record(ctx context.Context, ev *varve.RecordedEvent, after, floorPos varve.Position, floor *timerKey) error {
	switch ev.Type {
	case TypeTimer, TypeTimerCancel:
		var rec timerRec
		if err := json.Unmarshal(ev.Data, &rec); err != nil {
			return fmt.Errorf("workflow: %s@%d: %w", ev.Stream, ev.Version, err)
		}
		if ev.Type == TypeTimerCancel {
			e.index.remove(timerName{ev.Stream, rec.ID})
			return nil
		}
		fl := floor
		if floorPos.Less(ev.Position) {
			fl = nil
		}
		e.index.schedule(timerKey{due: rec.Due, stream: ev.Stream, id: rec.ID}, after, fl)
		return nil
	}
	if !floorPos.Less(ev.Position) {
		return nil // read before this rescan
	}
	switch ev.Type {
	case TypeOutbox:
		e.count(ev.Stream, 1, after)
	case TypeSent:
		e.count(ev.Stream, -1, after)
	case TypeCancelled:
		e.count(ev.Stream, -e.unsent[ev.Stream], after)
	case TypeRetryRequested:
		if err := e.r.retry(ctx, e.id(ev.Stream), ev.Data); err != nil {
			if !ofInstances(err) {
				return err
			}
			e.report(err)
		}
	}
	return nil
}

// count adds n to the unsent commands of stream, read after position
// after; a stream beyond the budgets is let go, to be read again.
func (e *engine[S]) count(stream string, n int, after varve.Position) {
	c, ok := e.unsent[stream]
	switch {
	case ok && c+n <= 0:
		delete(e.unsent, stream)
		e.unsentBytes -= unsentOverhead + int64(len(stream))
	case ok:
		e.unsent[stream] = c + n
	case n <= 0:
	case len(e.unsent) >= max(e.index.maxCount, 1) || e.unsentBytes+unsentOverhead+int64(len(stream)) > e.index.maxBytes && len(e.unsent) > 0:
		if !e.overflow || after.Less(e.unsentFrom) {
			e.unsentFrom = after
		}
		e.overflow = true
	default:
		e.unsent[stream] = n
		e.unsentBytes += unsentOverhead + int64(len(stream))
	}
}

func (e *engine[S]) report(err error) {
	if e.onError != nil && err != nil {
		e.onError(err)
	}
}

// send relays the unsent commands of the instance of stream; a failure is
// reported and the stream kept for the next tick.
func (e *engine[S]) send(ctx context.Context, stream string) bool {
	if _, err := e.r.Relay(ctx, e.id(stream)); err != nil {
		e.report(err)
		return false
	}
	return true
}

// relayUnsent relays every instance held with unsent commands and, once
// none is left after an overflow, reads the command records after the
// first let go again.
func (e *engine[S]) relayUnsent(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		for stream := range e.unsent {
			if ctx.Err() != nil {
				return nil
			}
			if e.send(ctx, stream) {
				e.unsentBytes -= unsentOverhead + int64(len(stream))
				delete(e.unsent, stream)
			}
		}
		if len(e.unsent) > 0 || !e.overflow {
			return nil
		}
		from, through := e.unsentFrom, e.scanned
		e.overflow = false
		f := varve.Filter{Categories: []string{e.r.def.Name}, Types: []string{TypeOutbox, TypeSent, TypeCancelled}}
		after := from
		for ev, err := range e.r.store.ReadAll(ctx, from, f) {
			if err != nil {
				return fmt.Errorf("workflow: scan commands: %w", err)
			}
			if through.Less(ev.Position) {
				break
			}
			if e.mine == nil || e.mine(ev.Stream) {
				_ = e.record(ctx, &ev, after, varve.Start, nil)
			}
			after = ev.Position
		}
	}
}

// TimerIndexStats describes FireDue's in-memory timer index.
type TimerIndexStats struct {
	Timers   int   // pending timers held
	Bytes    int64 // their estimated size
	Complete bool  // false when timers beyond the budget were let go
	Rescans  int   // re-reads of $all for timers let go, since NewRunner
}

// TimerIndex returns the state of FireDue's timer index.
func (r *Runner[S]) TimerIndex() TimerIndexStats {
	e := r.fire
	e.mu.Lock()
	defer e.mu.Unlock()
	return TimerIndexStats{Timers: e.index.len(), Bytes: e.index.bytes, Complete: e.index.unbounded, Rescans: e.rescans}
}

// ownRecord reports whether e is a record of the workflow's own category of
// type typ.
func (r *Runner[S]) ownRecord(e *varve.RecordedEvent, typ string) (id string, ok bool) {
	own := r.def.Name + r.store.Config().CategorySeparator
	if e.Type != typ || !strings.HasPrefix(e.Stream, own) {
		return "", false
	}
	return strings.TrimPrefix(e.Stream, own), true
}
