package projection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/internal/backoff"
	"github.com/varve-go/varve/shred"
	"github.com/varve-go/varve/subscription"
)

// handle handles one batch read from the subscription, split where it
// crosses the origin, so that Replaying is exact.
func (r *Runner) handle(ctx context.Context, b subscription.Batch, origin varve.Position) error {
	evs := b.Events
	switch sep := r.store.Config().CategorySeparator; {
	case r.p.Erasures:
		evs = slices.DeleteFunc(evs, func(e varve.RecordedEvent) bool {
			if strings.HasPrefix(e.Stream, varve.SystemPrefix) {
				return e.Stream != shred.ErasureStream
			}
			return !r.p.Filter.Match(&e, sep)
		})
	case r.cfg.LocalFilter && !r.p.Filter.IsZero():
		evs = slices.DeleteFunc(evs, func(e varve.RecordedEvent) bool { return !r.p.Filter.Match(&e, sep) })
	}
	i := 0
	for i < len(evs) && !origin.Less(evs[i].Position) {
		i++
	}
	if i > 0 && i < len(evs) {
		if err := r.apply(ctx, Batch{Events: evs[:i], Through: evs[i-1].Position, Replaying: true}); err != nil {
			return err
		}
		evs, i = evs[i:], 0
	}
	replay := i == len(evs) && (len(evs) > 0 || !origin.Less(b.Through))
	return r.apply(ctx, Batch{Events: evs, Through: b.Through, Replaying: replay})
}

// apply handles a batch and moves the checkpoint to its end, retrying
// with back-off; a batch that keeps failing is handled event by event to
// find the poison one.
func (r *Runner) apply(ctx context.Context, b Batch) error {
	b.Version = r.p.Version
	if r.p.Erasures && b.erased == nil {
		b.erased = new([]shred.ReadModelErasure)
	}
	if len(b.Events) == 0 && r.p.Commit == nil {
		if err := r.save(ctx, b.Through); err != nil {
			return err
		}
		r.done(b)
		return nil
	}
	err := r.attempts(ctx, b)
	if err == nil || len(b.Events) <= 1 {
		if err != nil && ctx.Err() == nil {
			return r.poison(ctx, b, err)
		}
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for i := range b.Events {
		one := Batch{Events: b.Events[i : i+1], Through: b.Events[i].Position, Replaying: b.Replaying, Version: b.Version, erased: b.erased}
		if i == len(b.Events)-1 {
			one.Through = b.Through
		}
		if err := r.apply(ctx, one); err != nil {
			return err
		}
	}
	return nil
}

// attempts tries b until it is applied or Config.Retry gives up; it
// returns the last error.
func (r *Runner) attempts(ctx context.Context, b Batch) error {
	var err error
	first := time.Now()
	for n := 1; ; n++ {
		if b.erased != nil {
			*b.erased = (*b.erased)[:0]
		}
		if err = r.once(ctx, b); err == nil || errors.Is(err, ErrApplied) {
			r.recordErasures(ctx, b)
			r.done(b)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.set(func(s *Status) { s.LastError = err.Error() })
		delay := r.cfg.Retry.Delay(n)
		if r.cfg.Retry.GiveUp(n, first, time.Now().Add(delay)) {
			return err
		}
		if serr := backoff.Sleep(ctx, delay); serr != nil {
			return serr
		}
	}
}

// done records a handled batch in the status.
func (r *Runner) done(b Batch) {
	t := time.Now()
	defer r.moved.Notify()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Position = b.Through
	r.st.Lag = lag(b.Through, r.st.Head)
	if !b.Through.Less(r.st.Head) {
		r.st.LagTime = 0
	}
	r.st.Handled += int64(len(b.Events))
	r.rateN += int64(len(b.Events))
	if d := t.Sub(r.rateAt); r.rateAt.IsZero() || d >= time.Second {
		if !r.rateAt.IsZero() {
			r.st.Rate = float64(r.rateN) / d.Seconds()
		}
		r.rateAt, r.rateN = t, 0
	}
}

func (r *Runner) once(ctx context.Context, b Batch) error {
	name := r.checkpointName()
	if r.p.Commit != nil {
		return r.p.Commit(ctx, name, b)
	}
	if len(b.Events) > 0 {
		if err := r.p.Handle(ctx, b); err != nil {
			return err
		}
	}
	if b.Parked {
		return nil
	}
	return r.save(ctx, b.Through)
}

// save saves the checkpoint of a handled batch, even when ctx has just
// ended.
func (r *Runner) save(ctx context.Context, pos varve.Position) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.cps.SaveCheckpoint(sctx, r.checkpointName(), pos); err != nil {
		return fmt.Errorf("projection %q: save checkpoint: %w", r.p.Name, err)
	}
	return nil
}

// maxParkedError bounds the handler's error kept with a parked event.
const maxParkedError = 4 << 10

func (r *Runner) poison(ctx context.Context, b Batch, cause error) error {
	e := b.Events[0]
	if r.cfg.Poison != Park {
		return fmt.Errorf("projection %q: %w: %s@%d (position %v): %w", r.p.Name, ErrStopped, e.Stream, e.Version, e.Position, cause)
	}
	msg := cause.Error()
	if len(msg) > maxParkedError {
		msg = strings.ToValidUTF8(msg[:maxParkedError], "")
	}
	pe := delivery.ParkedEvent{Subscription: r.checkpointName(), Stream: e.Stream, Version: e.Version, Position: e.Position,
		EventID: e.ID, Type: e.Type, Attempts: max(r.cfg.Retry.MaxAttempts, 0), Reason: delivery.ReasonExhausted, Error: msg, ParkedAt: time.Now().UTC()}
	if _, err := delivery.NewParked(r.store, r.checkpointName()).Park(ctx, pe); err != nil {
		return fmt.Errorf("projection %q: park %s@%d: %w (handler: %w)", r.p.Name, e.Stream, e.Version, err, cause)
	}
	// The parked event is passed over: the checkpoint moves past it (on
	// the transactional path, with an empty batch).
	skip := Batch{Through: b.Through, Replaying: b.Replaying, Version: b.Version}
	if err := r.attempts(ctx, skip); err != nil {
		return err
	}
	r.set(func(s *Status) { s.Parked++ })
	return nil
}

// recordErasures records in the erasure reports what the handler of the
// applied batch b removed of erased subjects. A failure is the status's
// LastError: the rows are gone; only the report misses them.
func (r *Runner) recordErasures(ctx context.Context, b Batch) {
	if b.erased == nil {
		return
	}
	for _, e := range *b.erased {
		e.ReadModel = fmt.Sprintf("projection %s v%d", r.p.Name, r.p.Version)
		if err := shred.ReadModelErased(context.WithoutCancel(ctx), r.store, e); err != nil {
			r.set(func(s *Status) { s.LastError = err.Error() })
		}
	}
	*b.erased = (*b.erased)[:0]
}

// withErasures widens f to the events of package shred's erasure stream,
// whose category is cat; the runner drops what the widening lets in
// besides them.
func withErasures(f varve.Filter, cat string) varve.Filter {
	if f.IsZero() {
		return f
	}
	add := func(l []string, v string) []string {
		if len(l) == 0 {
			return l
		}
		return append(slices.Clip(l), v)
	}
	return varve.Filter{
		Categories:     add(f.Categories, cat),
		Types:          add(f.Types, shred.ErasedType),
		StreamPrefixes: add(f.StreamPrefixes, shred.ErasureStream),
	}
}
