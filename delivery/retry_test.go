package delivery

import (
	"testing"
	"time"

	"github.com/varve-go/varve/subscription"
)

// TestRetryBackoff: the retry delays keep subscription.RetryPolicy's meaning with the delivery defaults: the
// initial delay, doubling per failed attempt up to the maximum, less at
// most Jitter of it.
func TestRetryBackoff(t *testing.T) {
	cfg, err := Config{Retry: subscription.RetryPolicy{InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Jitter: -1}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for attempt, want := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 3: 40 * time.Millisecond, 4: 50 * time.Millisecond, 30: 50 * time.Millisecond} {
		if got := cfg.Retry.Delay(attempt); got != want {
			t.Errorf("delay after attempt %d: %v, want %v", attempt, got, want)
		}
	}
	cfg, err = Config{Retry: subscription.RetryPolicy{InitialBackoff: 100 * time.Millisecond}}.withDefaults() // default jitter 0.2
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if got := cfg.Retry.Delay(2); got <= 160*time.Millisecond || got > 200*time.Millisecond {
			t.Fatalf("delay after attempt 2 with jitter 0.2: %v, want (160ms, 200ms]", got)
		}
	}
}
