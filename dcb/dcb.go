// Package dcb decides on Dynamic Consistency Boundaries (dcb.events): a
// command reads the events that match a query, folds them into the state
// its decision needs, and appends its events on the condition that no
// event matching the query came after what it read. Another writer that
// got there first fails the condition; the command then reads and decides
// again. Unrelated commands, whose queries match none of each other's
// events, never conflict, whatever streams they write.
//
// The store's backend must keep tags ([varve.TagStore]).
package dcb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/varve-go/varve"
)

// DefaultMaxAttempts bounds the attempts of [Execute] when Options leave
// it at 0.
const DefaultMaxAttempts = 10

// Decision is what a command decided: the events to append, and the
// stream to append them to (any expected version).
type Decision struct {
	Stream string
	Events []varve.Event
}

// Options tune [Execute].
type Options struct {
	// MaxAttempts bounds the attempts, default DefaultMaxAttempts.
	MaxAttempts int
}

// Execute reads the events that match q, folds them from initial with
// apply, and asks decide for the events to append; it appends them on the
// condition that nothing matching q was appended after what it read, and
// on a failed condition runs again, up to MaxAttempts times, waiting a
// short random time between later attempts. decide must decide from the
// state it is given only, and may run more than once; an error of decide
// is returned as is and nothing is appended, nor when decide returns no
// events. Execute returns the append's result and the state it decided on.
func Execute[S any](ctx context.Context, store *varve.Store, q varve.Query, initial S,
	apply func(S, varve.RecordedEvent) S, decide func(S) (Decision, error), opts Options) (varve.AppendResult, S, error) {
	max := opts.MaxAttempts
	if max <= 0 {
		max = DefaultMaxAttempts
	}
	for attempt := 1; ; attempt++ {
		state, through, err := Fold(ctx, store, q, initial, apply)
		if err != nil {
			return varve.AppendResult{}, state, err
		}
		d, err := decide(state)
		if err != nil || len(d.Events) == 0 {
			return varve.AppendResult{}, state, err
		}
		res, err := store.AppendIf(ctx, d.Stream, varve.Any, varve.AppendCondition{FailIfEventsMatch: q, After: through}, d.Events...)
		if err == nil || !errors.Is(err, varve.ErrAppendConditionFailed) {
			return res, state, err
		}
		if attempt >= max {
			return varve.AppendResult{}, state, fmt.Errorf("dcb: gave up after %d attempts: %w", attempt, err)
		}
		// Each retry appends the same events: a retry of an append that
		// did commit is recognised by its ids.
		if attempt > 1 {
			t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 5))))
			select {
			case <-ctx.Done():
				t.Stop()
				return varve.AppendResult{}, state, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// Fold reads every event that matches q and folds them from initial with
// apply. It returns the state and the position it read through, the
// position of a condition on q for a decision on the state.
func Fold[S any](ctx context.Context, store *varve.Store, q varve.Query, initial S, apply func(S, varve.RecordedEvent) S) (S, varve.Position, error) {
	state, pos := initial, varve.Start
	var buf []varve.RecordedEvent
	for {
		page, err := store.ReadQueryPage(ctx, q, pos, buf[:0])
		if err != nil {
			return state, pos, err
		}
		for _, e := range page.Events {
			state = apply(state, e)
		}
		buf, pos = page.Events, page.Through
		if !page.Full {
			return state, pos, nil
		}
	}
}
