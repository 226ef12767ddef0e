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
	"github.com/varve-go/varve/subscription"
)

// TestRunActive runs one projection version from two holders: one handles
// every event while the other waits; when the first stops, the second
// goes on from its checkpoint, and each event is handled once.
func TestRunActive(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
		rec := newRecorder()
		var mu sync.Mutex
		by := map[string]int{}
		handler := func(holder string) projection.Handler {
			return func(ctx context.Context, b projection.Batch) error {
				mu.Lock()
				by[holder] += len(b.Events)
				mu.Unlock()
				return rec.handle(ctx, b)
			}
		}
		cfg := with(base, projection.Config{MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond, ControlPoll: -1})
		// Leases of 5 s, renewed every 1.7 s: with 1 s, a holder starved for
		// 0.7 s on a busy machine lost its lease mid-run (a fail-over, which
		// the kill tests of package subscription cover) and both handled events.
		newRunner := func(holder string) (*projection.Runner, error) {
			cfg := cfg
			cfg.Lease = subscription.Lease{Holder: holder, TTL: 5 * time.Second}
			return projection.NewRunner(s, projection.Projection{Name: "balances", Version: 1,
				Filter: varve.Filter{Categories: []string{"acct"}}, Handle: handler(holder)}, cfg)
		}
		runner := func(holder string) *projection.Runner {
			r, err := newRunner(holder)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if !s.Capabilities().Leases {
			if _, err := newRunner("a"); !errors.Is(err, varve.ErrNotSupported) {
				t.Fatalf("without leases: %v", err)
			}
			return
		}
		ctxA, stopA := context.WithCancel(t.Context())
		ctxB, stopB := context.WithCancel(t.Context())
		defer stopB()
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		wg.Go(func() { errs <- runner("a").Run(ctxA) })
		wg.Go(func() { errs <- runner("b").Run(ctxB) })
		ids := appendN(t, s, "acct", "Deposited", 30, 3)
		waitFor(t, "30 events handled", func() bool { return rec.count() == 30 })
		mu.Lock()
		first := "a"
		if by["b"] > 0 {
			first = "b"
		}
		if by["a"] > 0 && by["b"] > 0 {
			t.Errorf("both holders handled events: %v", by)
		}
		mu.Unlock()
		if first == "a" {
			stopA()
		} else {
			stopB()
		}
		ids = append(ids, appendN(t, s, "acct", "Deposited", 30, 3)...)
		waitFor(t, "60 events handled", func() bool { return rec.count() == 60 })
		stopA()
		stopB()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		rec.check(t, ids)
		mu.Lock()
		defer mu.Unlock()
		if by[first] != 30 || len(by) != 2 {
			t.Errorf("events by holder %v: want 30 by %q, then 30 by the other", by, first)
		}
	})
}

// TestRunSegmented runs one projection version in 4 segments over two
// holders: each event is handled once, each stream in order; when one
// holder stops, the other takes its segments from their checkpoints.
func TestRunSegmented(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
		rec := newRecorder()
		cfg := with(base, projection.Config{MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond, ControlPoll: -1})
		p := projection.Projection{Name: "ledger", Version: 1, Filter: varve.Filter{Categories: []string{"acct"}}, Handle: rec.handle}
		newRunner := func(holder string) (*projection.Runner, error) {
			cfg := cfg
			cfg.Lease = subscription.Lease{Holder: holder, TTL: time.Second, Segments: 4}
			return projection.NewRunner(s, p, cfg)
		}
		runner := func(holder string) *projection.Runner {
			r, err := newRunner(holder)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if !s.Capabilities().Leases {
			if _, err := newRunner("a"); !errors.Is(err, varve.ErrNotSupported) {
				t.Fatalf("without leases: %v", err)
			}
			return
		}
		a, b := runner("a"), runner("b")
		ctxA, stopA := context.WithCancel(t.Context())
		ctxB, stopB := context.WithCancel(t.Context())
		defer stopB()
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		wg.Go(func() { errs <- a.Run(ctxA) })
		wg.Go(func() { errs <- b.Run(ctxB) })
		waitFor(t, "both holders to hold 2 segments", func() bool { return len(a.SegmentStatus()) == 2 && len(b.SegmentStatus()) == 2 })
		ids := appendN(t, s, "acct", "Deposited", 40, 10)
		waitFor(t, "40 events handled", func() bool { return rec.count() == 40 })
		stopA()
		waitFor(t, "b to hold every segment", func() bool { return len(b.SegmentStatus()) == 4 })
		members, segs, err := projection.SegmentHolders(t.Context(), s, "ledger", 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(members) != 1 || members[0] != "b" || len(segs) != 4 {
			t.Fatalf("holders after a stopped: members %v, %d segments", members, len(segs))
		}
		for _, sh := range segs {
			if sh.Holder != "b" || !sh.CheckpointOK {
				t.Errorf("segment %d: %+v", sh.Segment, sh)
			}
		}
		ids = append(ids, appendN(t, s, "acct", "Deposited", 40, 10)...)
		waitFor(t, "80 events handled", func() bool { return rec.count() == 80 })
		stopB()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		rec.check(t, ids)
	})
}

func TestSegmentedRunnerRefusals(t *testing.T) {
	s := teststore.Kinds[0].Open(t, varve.Config{})
	p := projection.Projection{Name: "x", Version: 1, Handle: func(context.Context, projection.Batch) error { return nil }}
	for _, cfg := range []projection.Config{
		{Segment: 4, Segments: 4},
		{Segment: -1, Segments: 4},
		{Segment: 0, Segments: 4, Promote: true},
	} {
		if _, err := projection.NewRunner(s, p, cfg); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	for _, cfg := range []projection.Config{
		{Promote: true, Lease: subscription.Lease{Holder: "a", Segments: 4}},
		{Segment: 1, Segments: 2, Lease: subscription.Lease{Holder: "a", Segments: 4}},
		{Lease: subscription.Lease{TTL: time.Second}},
		{Lease: subscription.Lease{Holder: "a", TTL: time.Nanosecond}},
	} {
		if _, err := projection.NewRunner(s, p, cfg); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", cfg, err)
		}
	}
	if _, err := projection.NewRunner(s, p, projection.Config{Checkpoints: subscription.NewMemoryCheckpoints(), Lease: subscription.Lease{Holder: "a"}}); !errors.Is(err, varve.ErrNotSupported) {
		t.Errorf("own checkpoints under a lease: %v, want ErrNotSupported", err)
	}
}
