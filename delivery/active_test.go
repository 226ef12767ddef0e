package delivery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/subscription"
)

// TestSingleActiveDispatcher runs one delivery from two holders through
// subscription.RunWith under a lease: one delivers, the other waits; when the first
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
		cfg := subscription.Config{Name: "hooks", MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond,
			Lease: subscription.Lease{Holder: holder, TTL: 300 * time.Millisecond}}
		return subscription.RunWith(ctx, s, cfg, func(ctx context.Context, sub *subscription.Subscription) error {
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

// TestSegmentedDispatcher runs one delivery split into 4 segments over two
// holders through subscription.RunWith with 4 lease segments: each holder delivers the streams
// of its segments, each event once and each stream in order; when one
// stops, the other delivers its segments from their checkpoints.
func TestSegmentedDispatcher(t *testing.T) {
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	got := map[varve.Position][]string{}
	last := map[string]varve.Version{}
	var problems []string
	run := func(ctx context.Context, holder string) error {
		cfg := subscription.Config{Name: "hooks", MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond,
			Lease: subscription.Lease{Holder: holder, TTL: time.Second, Segments: 4}}
		return subscription.RunWith(ctx, s, cfg, func(ctx context.Context, sub *subscription.Subscription) error {
			d, err := delivery.New(sub, delivery.SinkFunc(func(_ context.Context, dl delivery.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				e := dl.Event
				if e.Version != last[e.Stream]+1 {
					problems = append(problems, fmt.Sprintf("%s@%d after %d", e.Stream, e.Version, last[e.Stream]))
				}
				last[e.Stream] = e.Version
				got[e.Position] = append(got[e.Position], holder)
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
	balanced := func(want int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a bound on a hang
		for {
			members, segs, err := subscription.SegmentStatus(t.Context(), s, "hooks", 4)
			if err != nil {
				t.Fatal(err)
			}
			held := map[string]int{}
			for _, sh := range segs {
				held[sh.Holder]++
			}
			even := len(members) == want && held[""] == 0
			for _, m := range members {
				even = even && held[m] == 4/want
			}
			if even {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("members %v, segments held %v", members, held)
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
		for i := range n {
			if _, err := s.Append(t.Context(), fmt.Sprintf("order-%d", i%10), varve.Any, varve.NewEvent("Placed", nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	balanced(2)
	appendTo(40)
	wait(40)
	stopA()
	balanced(1)
	appendTo(40)
	wait(80)
	stopB()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("out of order: %v", problems)
	}
	byHolder := map[string]int{}
	for pos, hs := range got {
		if len(hs) != 1 {
			t.Errorf("event at %s delivered %d times: %v", pos, len(hs), hs)
		}
		byHolder[hs[0]]++
	}
	if byHolder["a"] == 0 || byHolder["b"] <= 40 {
		t.Errorf("deliveries by holder %v: both deliver, b all after a stopped", byHolder)
	}
}
