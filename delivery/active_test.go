package delivery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/subscription"
)

// TestSingleActiveDispatcher runs one delivery from two holders through
// subscription.Active: one delivers, the other waits; when the first
// stops, the second delivers the rest from the checkpoint, each event once.
func TestSingleActiveDispatcher(t *testing.T) {
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	got := map[varve.Position][]string{}
	run := func(ctx context.Context, holder string) error {
		cfg := subscription.Config{Name: "hooks", MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond}
		return subscription.Active(ctx, s, cfg, holder, 300*time.Millisecond, func(ctx context.Context, sub *subscription.Subscription) error {
			d, err := delivery.New(sub, delivery.SinkFunc(func(_ context.Context, dl delivery.Delivery) error {
				mu.Lock()
				got[dl.Event.Position] = append(got[dl.Event.Position], holder)
				mu.Unlock()
				return nil
			}), delivery.Config{Concurrency: 4})
			if err != nil {
				return err
			}
			return d.Run(ctx)
		})
	}
	wait := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a bound on a hang
		for {
			mu.Lock()
			k := len(got)
			mu.Unlock()
			if k >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d events delivered", k, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	ctxA, stopA := context.WithCancel(t.Context())
	ctxB, stopB := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- run(ctxA, "a") })
	wg.Go(func() { errs <- run(ctxB, "b") })
	appendTo := func(n int) {
		for range n {
			if _, err := s.Append(t.Context(), "order-1", varve.Any, varve.NewEvent("Placed", nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendTo(40)
	wait(40)
	mu.Lock()
	first := got[varve.Position{Seq: 1}][0]
	mu.Unlock()
	if first == "a" {
		stopA()
	} else {
		stopB()
	}
	appendTo(40)
	wait(80)
	stopA()
	stopB()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	byHolder := map[string]int{}
	for pos, hs := range got {
		if len(hs) != 1 {
			t.Errorf("event at %s delivered %d times: %v", pos, len(hs), hs)
		}
		byHolder[hs[0]]++
	}
	if byHolder[first] != 40 || len(byHolder) != 2 {
		t.Errorf("deliveries by holder %v, want 40 by %q and 40 by the other", byHolder, first)
	}
}
