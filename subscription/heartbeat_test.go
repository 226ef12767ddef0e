package subscription_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/subscription"
)

// beatingChild runs the subscription "beating" with a heartbeat of 200 ms
// until it is killed.
func beatingChild(ctx context.Context, s *varve.Store, _ *os.File) error {
	cfg := subscription.Config{Name: "beating", Heartbeat: 200 * time.Millisecond}
	sub, err := subscription.Open(ctx, s, cfg)
	if err != nil {
		return err
	}
	return sub.Run(ctx, func(context.Context, varve.RecordedEvent) error { return nil })
}

// waitRunning polls subscription.Running until it counts want.
func waitRunning(t *testing.T, s *varve.Store, name string, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		beats, err := subscription.Running(t.Context(), s, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(beats) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d heartbeats after a minute, want %d: %+v", name, len(beats), want, beats)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHeartbeat: a running subscription says so on every backend, one
// heartbeat per run; a run that ends releases it at once; a consumer
// whose name begins with another's is not counted as that one.
func TestHeartbeat(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		s := k.Open(t, varve.Config{})
		run := func(name string) (stop func()) {
			sub, err := subscription.Open(t.Context(), s, subscription.Config{Name: name, Heartbeat: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- sub.Run(ctx, func(context.Context, varve.RecordedEvent) error { return nil }) }()
			return func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("run %s: %v", name, err)
				}
			}
		}
		waitRunning(t, s, "hb", 0)
		if _, ok, err := subscription.LastSeen(t.Context(), s, "hb"); ok || err != nil {
			t.Fatalf("a consumer never run was seen: %v %v", ok, err)
		}
		began := time.Now()
		stopA, stopB := run("hb"), run("hb")
		stopSeg := run("hb/segment/0-of-2")
		waitRunning(t, s, "hb", 2)
		waitRunning(t, s, "hb/segment/0-of-2", 1)
		stopA()
		// Released when the run ends, not when the lease expires.
		if beats, err := subscription.Running(t.Context(), s, "hb"); err != nil || len(beats) != 1 {
			t.Fatalf("after one run ended: %+v %v, want 1 heartbeat", beats, err)
		}
		stopB()
		stopSeg()
		waitRunning(t, s, "hb", 0)
		// The stop recorded when it was seen last.
		if at, ok, err := subscription.LastSeen(t.Context(), s, "hb"); !ok || err != nil || at.Before(began) || at.After(time.Now()) {
			t.Fatalf("last seen %v %v %v, want a time since %v", at, ok, err, began)
		}
		off, err := subscription.Open(t.Context(), s, subscription.Config{Name: "quiet", Heartbeat: -1})
		if err != nil {
			t.Fatal(err)
		}
		stop := off.Heartbeat(t.Context())
		if beats, err := subscription.Running(t.Context(), s, "quiet"); err != nil || len(beats) != 0 {
			t.Fatalf("a heartbeat turned off: %+v %v", beats, err)
		}
		stop()
	})
}

// TestHeartbeatKilled: the heartbeat of a process killed with SIGKILL
// disappears once its lease expires (three beats), on every backend that
// processes share.
func TestHeartbeatKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for kind, storeURL := range killStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s, err := open.Store(t.Context(), storeURL, varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			child := startChild(t, "beating", storeURL, os.DevNull)
			defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
			waitRunning(t, s, "beating", 1)
			if err := child.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			killed := time.Now()
			waitRunning(t, s, "beating", 0)
			t.Logf("%s: the heartbeat was gone %v after the kill", kind, time.Since(killed).Round(time.Millisecond))
			// Stopped since: the last record of its beats, before the kill.
			if at, ok, err := subscription.LastSeen(t.Context(), s, "beating"); !ok || err != nil || at.After(killed) {
				t.Fatalf("last seen %v %v %v, want a time before the kill at %v", at, ok, err, killed)
			}
		})
	}
}
