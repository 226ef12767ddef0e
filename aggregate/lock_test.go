package aggregate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestKeyLocks: one holder per key at a time, waiters give up with their
// context, and no lock outlives its holders and waiters.
func TestKeyLocks(t *testing.T) {
	k := newKeyLocks()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		holders = map[string]int{}
	)
	for w := range 16 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("acct-%d", (w+i)%5)
				l, err := k.lock(context.Background(), key)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				holders[key]++
				if holders[key] != 1 {
					t.Errorf("%d holders of %s", holders[key], key)
				}
				mu.Unlock()
				mu.Lock()
				holders[key]--
				mu.Unlock()
				k.unlock(key, l)
			}
		})
	}
	wg.Wait()

	held, _ := k.lock(context.Background(), "busy")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := k.lock(ctx, "busy"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter on a held lock: %v, want its context's error", err)
	}
	if n := k.held(); n != 1 {
		t.Fatalf("%d locks with one holder and a waiter gone", n)
	}
	k.unlock("busy", held)
	if n := k.held(); n != 0 {
		t.Fatalf("%d locks left after every holder and waiter", n)
	}
}
