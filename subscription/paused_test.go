package subscription_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/subscription"
)

const pausedTTL = time.Second

// pausedChild runs the subscription "paused" single-active with a slow
// handler that logs each event.
func pausedChild(ctx context.Context, s *varve.Store, log *os.File) error {
	cfg := subscription.Config{Name: "paused", Start: subscription.FromCheckpointOrBeginning, PageSize: 50, MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond}
	cfg.Lease = subscription.Lease{Holder: "child", TTL: pausedTTL}
	return subscription.Run(ctx, s, cfg, func(_ context.Context, e varve.RecordedEvent) error {
		fmt.Fprintf(log, "%s %d\n", e.Stream, e.Version)
		time.Sleep(50 * time.Millisecond) // a batch of 50 takes 2.5 s: the pause comes in the middle
		return nil
	})
}

// TestPausedHolder: a holder paused (SIGSTOP) in the middle of a batch for
// longer than its lease loses the subscription to another; when it goes
// on (SIGCONT), it finishes the batch it was handling, but the checkpoint
// save at its end is fenced: the checkpoint, watched from the moment it
// goes on, never moves back from where the new holder put it. On each
// backend whose processes can share a store: PostgreSQL, NATS, SQLite.
func TestPausedHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for kind, storeURL := range killStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testPausedHolder(t, storeURL)
		})
	}
}

func testPausedHolder(t *testing.T, storeURL string) {
	ctx := t.Context()
	s, err := open.Store(ctx, storeURL, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const events = 200
	var last varve.Position
	for i := range events {
		res, err := s.Append(ctx, fmt.Sprintf("acct-%d", i%4), varve.Any, varve.NewEvent("Moved", nil))
		if err != nil {
			t.Fatal(err)
		}
		last = res.Position
	}
	logPath := filepath.Join(t.TempDir(), "child.log")
	lines := func() int {
		b, _ := os.ReadFile(logPath)
		return bytes.Count(b, []byte("\n"))
	}
	cmd := startChild(t, "paused", storeURL, logPath)
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	waitFor := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a bound on a hang, not a timing assertion
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the child to handle its first events", func() bool { return lines() >= 3 })
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	atPause := lines()

	// Another holder takes over once the paused one's lease has expired,
	// and handles every event from the last checkpoint (none yet).
	cfg := subscription.Config{Name: "paused", Start: subscription.FromCheckpointOrBeginning, PageSize: 50, MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond}
	var mu sync.Mutex
	var first time.Time
	handled := 0
	hctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		cfg := cfg
		cfg.Lease = subscription.Lease{Holder: "parent", TTL: pausedTTL}
		err := subscription.Run(hctx, s, cfg, func(context.Context, varve.RecordedEvent) error {
			mu.Lock()
			if first.IsZero() {
				first = time.Now()
			}
			handled++
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	defer func() {
		stop()
		wg.Wait()
	}()
	cps := s.Checkpoints()
	waitFor("the new holder to save the last position", func() bool {
		pos, ok, err := cps.Load(ctx, "paused")
		return err == nil && ok && pos == last
	})
	mu.Lock()
	t.Logf("taken over %s after the pause (lease %s); %d events handled by the new holder", first.Sub(paused).Round(time.Millisecond), pausedTTL, handled)
	mu.Unlock()

	// The paused holder goes on: it finishes its batch, and its save is
	// refused. The checkpoint is watched until well after that batch.
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	watchUntil := time.Now().Add(5 * time.Second) // past the rest of a 2.5 s batch
	for time.Now().Before(watchUntil) {
		pos, ok, err := cps.Load(ctx, "paused")
		if err != nil {
			t.Fatal(err)
		}
		if !ok || pos != last {
			t.Fatalf("the checkpoint moved to %v (ok %v) after the paused holder went on; the new holder had saved %v", pos, ok, last)
		}
		time.Sleep(2 * time.Millisecond)
	}
	after := lines()
	if after <= atPause {
		t.Fatalf("the paused holder handled nothing after it went on (%d lines at the pause, %d now): it was not in a batch", atPause, after)
	}
	t.Logf("the paused holder handled %d events after it went on; its checkpoint save was refused", after-atPause)
}
