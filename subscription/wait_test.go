package subscription_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/subscription"
)

// TestWaitFor: a wait for a consumer's position returns once its
// checkpoint passes it, for events its filter reads and events it passes
// over, for a consumer run in segments once every segment has, and ends
// with the context otherwise; on every backend.
func TestWaitFor(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		s := k.Open(t, varve.Config{})
		ctx := t.Context()
		appendTo := func(stream string) varve.Position {
			t.Helper()
			res, err := s.Append(ctx, stream, varve.Any, varve.NewEvent("E", []byte(`{}`)))
			if err != nil {
				t.Fatal(err)
			}
			return res.Position
		}
		run := func(cfg subscription.Config) (stop func()) {
			t.Helper()
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- subscription.Run(rctx, s, cfg, func(context.Context, varve.RecordedEvent) error { return nil })
			}()
			return func() {
				cancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("run %s: %v", cfg.Name, err)
				}
			}
		}
		first := appendTo("order-1")
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := subscription.WaitFor(short, s, "orders", first); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a wait for a consumer that never ran: %v, want context.DeadlineExceeded", err)
		}
		defer run(subscription.Config{Name: "orders", Filter: varve.Filter{Categories: []string{"order"}}, MaxPoll: 20 * time.Millisecond})()
		for _, stream := range []string{"order-2", "cart-1"} { // read, passed over
			pos := appendTo(stream)
			if err := subscription.WaitFor(ctx, s, "orders", pos); err != nil {
				t.Fatalf("wait for the consumer through %s (%s): %v", pos, stream, err)
			}
			if cp, ok, err := s.Checkpoints().Load(ctx, "orders"); err != nil || !ok || cp.Less(pos) {
				t.Fatalf("after the wait the checkpoint is %s (%v %v), want %s or after", cp, ok, err, pos)
			}
		}

		// Segments, named as a split under leases names them: every
		// segment's checkpoint must pass the position.
		pos := appendTo("order-3")
		segment := func(i int) subscription.Config {
			return subscription.Config{Name: subscription.SegmentName("split", i, 2), Segment: i, Segments: 2, MaxPoll: 20 * time.Millisecond}
		}
		stop0 := run(segment(0))
		defer stop0()
		waitOne := func(name string) {
			t.Helper()
			if err := subscription.WaitFor(ctx, s, name, pos); err != nil {
				t.Fatal(err)
			}
		}
		waitOne(subscription.SegmentName("split", 0, 2))
		short, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := subscription.WaitFor(short, s, "split", pos); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a wait for a split consumer with one of two segments running: %v, want context.DeadlineExceeded", err)
		}
		defer run(segment(1))()
		waitOne("split")
	})
}
