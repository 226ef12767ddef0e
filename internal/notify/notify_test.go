package notify

import (
	"sync"
	"sync/atomic"
	"testing"
)

func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestBroadcast(t *testing.T) {
	var b Broadcast
	b.Notify() // nobody waits: nothing to do
	a, c := b.Wait(), b.Wait()
	if a != c || fired(a) {
		t.Fatal("waiters before a notify share one open channel")
	}
	b.Notify()
	if !fired(a) {
		t.Fatal("notify did not wake the waiters")
	}
	next := b.Wait()
	if fired(next) {
		t.Fatal("a wait after a notify fired at once")
	}
	b.Close()
	b.Close()
	if !fired(next) || !fired(b.Wait()) {
		t.Fatal("close did not wake the waiters for good")
	}
	b.Notify()
}

// TestNoLostWakeup: a waiter that takes its channel, then checks the state,
// either sees the change or is woken, however the goroutines interleave.
func TestNoLostWakeup(t *testing.T) {
	var b Broadcast
	var state atomic.Int64
	const rounds = 20000
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; i <= rounds; i++ {
			state.Store(int64(i))
			b.Notify()
		}
	})
	wg.Go(func() {
		seen := int64(0)
		for seen < rounds {
			ch := b.Wait()
			if s := state.Load(); s > seen {
				seen = s
				continue
			}
			<-ch // a lost wake-up would block here for ever
		}
	})
	wg.Wait()
}

func TestArmed(t *testing.T) {
	var b Broadcast
	idle := b.Armed()
	if fired(idle) {
		t.Fatal("armed with nobody waiting")
	}
	if b.Armed() != idle {
		t.Fatal("two asks while idle got different channels")
	}
	w := b.Wait()
	if !fired(idle) || !fired(b.Armed()) {
		t.Fatal("a wait did not arm")
	}
	b.Wait()
	b.Notify()
	if !fired(w) {
		t.Fatal("notify did not wake the waiter")
	}
	again := b.Armed()
	if fired(again) {
		t.Fatal("still armed after the notify woke every waiter")
	}
	b.Close()
	if !fired(again) || !fired(b.Armed()) {
		t.Fatal("close did not fire armed channels for good")
	}
}
