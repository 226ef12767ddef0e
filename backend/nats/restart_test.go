package nats

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/varve-go/varve"
)

// TestServerRestartMidAppend restarts an in-process server (same port, same
// store) while writers append. Every call returns within its context's
// bound; a writer retries a failed append with the same events until it is
// acknowledged (an idempotent retry); afterwards every acknowledged event is
// stored once, in order, and nothing else is.
func TestServerRestartMidAppend(t *testing.T) {
	dir := t.TempDir()
	srv, err := startServer(dir, -1)
	if err != nil {
		t.Fatal(err)
	}
	port := srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() }) // after the backend's clean-ups

	cfg := testConfig(srv.ClientURL(), uniqueName("restart"))
	cfg.Options = []natsgo.Option{
		natsgo.ReconnectWait(20 * time.Millisecond),
		natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}), // expected write errors
	}
	s, _ := mode{}.store(t, cfg)

	const writers, callTimeout = 4, time.Second
	stop := make(chan struct{})
	acked := make([][]varve.Event, writers)
	var (
		mu               sync.Mutex
		failures, slowed int
		worst            time.Duration
	)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			stream := fmt.Sprintf("w%d", w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				evs := makeEvents(1+w%3, 20)
				for attempt := 0; ; attempt++ {
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					t0 := time.Now()
					_, err := s.Append(ctx, stream, varve.Exact(varve.Version(len(acked[w]))), evs...)
					took := time.Since(t0)
					cancel()
					mu.Lock()
					worst = max(worst, took)
					if took > callTimeout+time.Second {
						slowed++
					}
					if err != nil {
						failures++
					}
					mu.Unlock()
					if err == nil {
						acked[w] = append(acked[w], evs...)
						break
					}
					if attempt == 200 {
						t.Errorf("writer %d: append still failing after %d attempts: %v", w, attempt, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	srv.Shutdown()
	srv.WaitForShutdown()
	time.Sleep(2 * callTimeout) // long enough for calls to give up
	if srv, err = startServer(dir, port); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d failed calls during the restart, slowest call %v", failures, worst)
	if failures == 0 {
		t.Errorf("no append failed: the restart did not happen during the appends")
	}
	if slowed > 0 {
		t.Errorf("%d calls took longer than their context's %v (+1s)", slowed, callTimeout)
	}
	total := 0
	for w := range writers {
		want := acked[w]
		got := collectAll(t, s.ReadStream(ctxT(t), fmt.Sprintf("w%d", w)))
		if len(got) != len(want) {
			t.Fatalf("writer %d: %d events stored, %d acknowledged", w, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Version != varve.Version(i+1) {
				t.Fatalf("writer %d: event %d is %s at version %d, want %s", w, i, got[i].ID, got[i].Version, want[i].ID)
			}
		}
		total += len(got)
	}
	t.Logf("%d acknowledged events all stored once, in order", total)
}
