package varve

import (
	"context"
	"fmt"
	"time"
)

// Polling bounds of [Store.WaitFor] on a backend that cannot wake it.
const (
	waitPollMin = 5 * time.Millisecond
	waitPollMax = 250 * time.Millisecond
)

// WaitFor waits until the global log is readable through pos: until
// [Store.LastPosition] is at or after it, so that a read of $all, filtered
// or not, returns the events up to pos. Give it the Position of an
// [AppendResult] to read your own writes through $all. It is bounded by
// ctx only: it fails with ctx's error when ctx ends first, and with
// [ErrClosed] when the store closes. It waits on [Store.Watch] where the
// backend notifies, and polls (every 5 to 250 ms) where it does not.
//
// On PostgreSQL the log's horizon can move back for a moment (a
// transaction without events that ends counts for it); a reader that must
// see pos checks that its read went through pos, and reads again if not.
func (s *Store) WaitFor(ctx context.Context, pos Position) error {
	poll := waitPollMin
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		watch := s.Watch()
		last, err := s.LastPosition(ctx)
		if err != nil {
			return fmt.Errorf("varve: wait for position %s: %w", pos, err)
		}
		if !last.Less(pos) {
			return nil
		}
		var tick <-chan time.Time
		if watch == nil {
			if timer == nil {
				timer = time.NewTimer(poll)
			} else {
				timer.Reset(poll)
			}
			tick, poll = timer.C, min(2*poll, waitPollMax)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("varve: wait for position %s (the log is through %s): %w", pos, last, ctx.Err())
		case <-s.life.Done():
			return fmt.Errorf("varve: wait for position %s: %w", pos, ErrClosed)
		case <-watch:
		case <-tick:
		}
	}
}
