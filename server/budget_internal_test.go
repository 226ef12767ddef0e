package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestBudget: a hold takes at most the whole budget, keep and free give
// back what a response no longer holds (never more than it holds), done
// gives back the rest, and a take that cannot get its share before the
// request's deadline is a 503.
func TestBudget(t *testing.T) {
	tests := []struct {
		name string
		take int
		then func(h *hold)
		free int64 // what the budget then has free
	}{
		{"a share", 4, func(*hold) {}, 6},
		{"over the whole budget", 25, func(*hold) {}, 0},
		{"keep what was read", 8, func(h *hold) { h.keep(3) }, 7},
		{"keep more than held", 8, func(h *hold) { h.keep(9) }, 2},
		{"free an event at a time", 8, func(h *hold) { h.keep(5); h.free(2); h.free(2) }, 9},
		{"free more than held", 8, func(h *hold) { h.free(3); h.free(30); h.free(1) }, 10},
		{"done", 8, func(h *hold) { h.free(1); h.done(); h.done() }, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBudget(10)
			h, err := b.take(t.Context(), tc.take)
			if err != nil {
				t.Fatal(err)
			}
			tc.then(h)
			if !b.sem.TryAcquire(tc.free) {
				t.Fatalf("less than %d bytes free", tc.free)
			}
			if b.sem.TryAcquire(1) {
				t.Fatalf("more than %d bytes free", tc.free)
			}
		})
	}
}

// TestBudgetWaits: a take waits while the budget lacks its share, gets it
// once enough is given back, and fails at once with a context that is
// done: a 503 past the deadline, the context's error when canceled.
func TestBudgetWaits(t *testing.T) {
	b := newBudget(10)
	h, err := b.take(t.Context(), 7)
	if err != nil {
		t.Fatal(err)
	}
	past, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = b.take(past, 5)
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusServiceUnavailable || ae.code != "busy" {
		t.Fatalf("a take past the deadline: %v, want a 503 busy", err)
	}
	canceled, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if _, err := b.take(canceled, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("a take with a canceled context: %v", err)
	}
	got := make(chan *hold)
	go func() {
		h2, err := b.take(context.Background(), 5)
		if err != nil {
			t.Error(err)
		}
		got <- h2
	}()
	h.keep(5) // 5 free now: the waiter gets its share
	h2 := <-got
	h.done()
	h2.done()
	if !b.sem.TryAcquire(10) {
		t.Fatal("the budget is not whole again")
	}
}
