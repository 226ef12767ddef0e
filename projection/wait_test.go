package projection_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
)

// TestWaitFor reads its own writes from a read model: after a runner's
// WaitFor (in process) or projection.WaitFor (through the checkpoints, as
// another process would) for an append's position, the read model holds
// the event; an event the filter passes over is waited for too; and a wait
// ends with its context. On every backend.
func TestWaitFor(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		s := k.Open(t, varve.Config{})
		ctx := t.Context()
		var mu sync.Mutex
		model := map[string]int{} // stream → events applied
		p := projection.Projection{Name: "counts", Version: 1, Filter: varve.Filter{Categories: []string{"order"}},
			Handle: func(_ context.Context, b projection.Batch) error {
				mu.Lock()
				defer mu.Unlock()
				for _, e := range b.Events {
					model[e.Stream]++
				}
				return nil
			}}
		r, err := projection.NewRunner(s, p, projection.Config{Promote: true, MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		appendTo := func(stream string) varve.Position {
			t.Helper()
			res, err := s.Append(ctx, stream, varve.Any, varve.NewEvent("E", []byte(`{}`)))
			if err != nil {
				t.Fatal(err)
			}
			return res.Position
		}
		first := appendTo("order-1")
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := r.WaitFor(short, first); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a wait on a runner that does not run: %v, want context.DeadlineExceeded", err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		defer func() {
			stop()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v", err)
			}
		}()
		applied := func(stream string) int {
			mu.Lock()
			defer mu.Unlock()
			return model[stream]
		}
		for i, wait := range []func(varve.Position) error{
			func(pos varve.Position) error { return r.WaitFor(ctx, pos) },
			func(pos varve.Position) error { return projection.WaitFor(ctx, s, "counts", pos) },
		} {
			stream := []string{"order-2", "order-3"}[i]
			if err := wait(appendTo(stream)); err != nil {
				t.Fatalf("wait %d: %v", i, err)
			}
			if n := applied(stream); n != 1 {
				t.Fatalf("wait %d: the read model holds %d events of %s, want 1", i, n, stream)
			}
			// Passed over by the filter, waited for all the same.
			if err := wait(appendTo("cart-1")); err != nil {
				t.Fatalf("wait %d for an event the filter passes over: %v", i, err)
			}
		}
		if n := applied("order-1"); n != 1 {
			t.Fatalf("the read model holds %d events of order-1, want 1", n)
		}
	})
}
