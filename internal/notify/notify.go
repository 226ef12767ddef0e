// Package notify is the "wake everyone at the next commit" signal of varve's
// backends and dispatcher: waiters take a channel, the next Notify closes it
// for all of them at once, and Close closes it for good.
//
// Notify costs one atomic load when nobody waits, so backends call it on
// every commit. A waiter that takes its channel and then reads misses no
// commit: a commit that Notify did not signal to it was visible to its read.
//
// A goroutine that looks for commits made elsewhere (another process on the
// same file) needs to do so only while somebody waits: [Broadcast.Armed]
// tells it when somebody does, so it can sleep otherwise.
package notify

import (
	"sync"
	"sync/atomic"
)

// Broadcast is a one-shot signal re-armed by every wait. Its zero value is
// ready to use; it is safe for concurrent use.
type Broadcast struct {
	waiting atomic.Bool
	mu      sync.Mutex
	ch      chan struct{} // nil when nobody waits
	armed   chan struct{} // closed when somebody waits; nil when nobody asked
	closed  bool
}

var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Wait returns a channel that is closed at the next Notify or at Close;
// after Close, a closed channel.
func (b *Broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return closed
	}
	if b.ch == nil {
		b.ch = make(chan struct{})
		b.waiting.Store(true)
		if b.armed != nil {
			close(b.armed)
			b.armed = nil
		}
	}
	return b.ch
}

// Armed returns a channel that is closed once somebody waits for the next
// Notify: at once if somebody does now; after Close, a closed channel.
func (b *Broadcast) Armed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.ch != nil {
		return closed
	}
	if b.armed == nil {
		b.armed = make(chan struct{})
	}
	return b.armed
}

// Notify wakes every waiter.
func (b *Broadcast) Notify() {
	if !b.waiting.Load() {
		return
	}
	b.mu.Lock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
		b.waiting.Store(false)
	}
	b.mu.Unlock()
}

// Close wakes every waiter for good: later waits (and Armed) return a
// closed channel. It is idempotent.
func (b *Broadcast) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	if b.armed != nil {
		close(b.armed)
		b.armed = nil
	}
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
		b.waiting.Store(false)
	}
}
