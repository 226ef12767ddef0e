package subscription

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/backoff"
)

// Polling bounds of [WaitFor]: a checkpoint's save wakes nobody.
const (
	waitPollMin = 5 * time.Millisecond
	waitPollMax = 250 * time.Millisecond
)

// WaitFor waits until the consumer name has handled the global log through
// pos: until its checkpoint is at or after pos or, for a consumer run in
// segments ([Config.Segments]), until the checkpoint of each segment of its
// newest group is. A consumer moves its checkpoint over the events its
// filter passes over too, so pos may be that of any event, such as an
// append's [varve.AppendResult.Position]: read your writes through a
// consumer's side effects. It works across processes, by polling the
// store's checkpoints (every 5 to 250 ms), and is bounded by ctx only.
func WaitFor(ctx context.Context, store *varve.Store, name string, pos varve.Position) error {
	poll := waitPollMin
	for {
		at, ok, err := handledThrough(ctx, store, name)
		switch {
		case err != nil:
			return fmt.Errorf("subscription %q: wait for position %s: %w", name, pos, err)
		case ok && !at.Less(pos):
			return nil
		}
		if err := backoff.Sleep(ctx, poll); err != nil {
			through := "no checkpoint yet"
			if ok {
				through = "handled through " + at.String()
			}
			return fmt.Errorf("subscription %q: wait for position %s (%s): %w", name, pos, through, err)
		}
		poll = min(2*poll, waitPollMax)
	}
}

// handledThrough returns the position through which the consumer name has
// handled the log: its checkpoint, or the lowest checkpoint of the
// segments of its newest group when it has segments' checkpoints and every
// segment of that group has one; ok is false when there is no such
// position yet.
func handledThrough(ctx context.Context, store *varve.Store, name string) (varve.Position, bool, error) {
	if store.Capabilities().ListCheckpoints {
		prefix := name + "/segment/"
		page, err := store.Checkpoints().List(ctx, varve.ListQuery{Prefix: prefix, Limit: varve.MaxListLimit})
		if err != nil {
			return varve.Start, false, err
		}
		// Group the segments' checkpoints by their count: a consumer split
		// anew keeps the checkpoints of its old split, and the finest
		// split is taken for the current one.
		groups := map[int]map[int]varve.Position{}
		newest := 0
		for _, cp := range page.Checkpoints {
			i, count, ok := parseSegment(strings.TrimPrefix(cp.Name, prefix))
			if !ok {
				continue
			}
			if groups[count] == nil {
				groups[count] = map[int]varve.Position{}
			}
			groups[count][i] = cp.Position
			newest = max(newest, count)
		}
		if newest > 0 {
			g := groups[newest]
			if len(g) < newest {
				return varve.Start, false, nil
			}
			low := g[0]
			for _, p := range g {
				if p.Less(low) {
					low = p
				}
			}
			return low, true, nil
		}
	}
	return store.Checkpoints().Load(ctx, name)
}

// parseSegment parses "<i>-of-<count>".
func parseSegment(s string) (i, count int, ok bool) {
	a, b, found := strings.Cut(s, "-of-")
	if !found {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	count, err2 := strconv.Atoi(b)
	return i, count, err1 == nil && err2 == nil && count > 0 && i >= 0 && i < count
}
