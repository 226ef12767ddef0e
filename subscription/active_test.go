package subscription_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

func TestRunActive(t *testing.T) {
	t.Parallel()
	eachBackend(t, testRunActive)
}

// testRunActive runs one subscription from two holders: one handles every
// event, the other waits; when the active one stops, the other takes over
// from its checkpoint and handles the rest, each event once.
func testRunActive(t *testing.T, open opener) {
	s := open(t, varve.Config{})
	cfg := subscription.Config{Name: "active", Start: subscription.FromCheckpointOrBeginning, MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond}
	if !s.Capabilities().Leases {
		cfg := cfg
		cfg.Lease = subscription.Lease{Holder: "a", TTL: time.Second}
		err := subscription.Run(t.Context(), s, cfg, nil)
		if !errors.Is(err, varve.ErrNotSupported) {
			t.Fatalf("without leases: %v, want ErrNotSupported", err)
		}
		return
	}
	var mu sync.Mutex
	handled := map[varve.Position][]string{}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(handled)
	}
	handler := func(holder string) subscription.Handler {
		return func(_ context.Context, e varve.RecordedEvent) error {
			mu.Lock()
			handled[e.Position] = append(handled[e.Position], holder)
			mu.Unlock()
			return nil
		}
	}
	ctxA, stopA := context.WithCancel(t.Context())
	ctxB, stopB := context.WithCancel(t.Context())
	defer stopB()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, r := range []struct {
		ctx    context.Context
		holder string
	}{{ctxA, "a"}, {ctxB, "b"}} {
		wg.Go(func() {
			cfg := cfg
			// The take-over below follows a release, not an expiry: a
			// long lease keeps a starved holder from losing it to a late
			// renewal (and handling again what it handled).
			cfg.Lease = subscription.Lease{Holder: r.holder, TTL: 5 * time.Second}
			errs <- subscription.Run(r.ctx, s, cfg, handler(r.holder))
		})
	}
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a bound on a hang, not a timing assertion
		for count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d events handled, want %d", count(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	appendN(t, s, "acct-1", "Deposited", 30)
	waitFor(30)
	mu.Lock()
	var first string
	for _, hs := range handled {
		if len(hs) != 1 || first != "" && hs[0] != first {
			t.Errorf("handled by %v (first holder %q): want one holder, once", hs, first)
		}
		first = hs[0]
	}
	mu.Unlock()
	// The active holder stops (and releases); the other takes over.
	stop := stopA
	if first == "b" {
		stop = stopB
	}
	stop()
	appendN(t, s, "acct-1", "Deposited", 30)
	waitFor(60)
	stopA()
	stopB()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for pos, hs := range handled {
		if len(hs) != 1 {
			t.Errorf("event at %s handled %d times: %v", pos, len(hs), hs)
		}
	}
	other := 0
	for _, hs := range handled {
		if hs[0] != first {
			other++
		}
	}
	if other != 30 {
		t.Errorf("the second holder handled %d events, want the 30 after the take-over", other)
	}
}
