package subscription_test

import (
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

func TestRetryPolicy(t *testing.T) {
	def := subscription.RetryPolicy{MaxAttempts: 5, InitialBackoff: 10 * time.Millisecond, MaxBackoff: time.Second, Jitter: 0.5}
	for _, tc := range []struct {
		name string
		in   subscription.RetryPolicy
		want subscription.RetryPolicy
		err  bool
	}{
		{"zero takes the defaults", subscription.RetryPolicy{}, def, false},
		{"set fields stay", subscription.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, Jitter: -1},
			subscription.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Second}, false},
		{"max below initial is raised", subscription.RetryPolicy{InitialBackoff: 2 * time.Second},
			subscription.RetryPolicy{MaxAttempts: 5, InitialBackoff: 2 * time.Second, MaxBackoff: 2 * time.Second, Jitter: 0.5}, false},
		{"age only", subscription.RetryPolicy{MaxAttempts: -1, MaxAge: time.Minute},
			subscription.RetryPolicy{MaxAttempts: -1, MaxAge: time.Minute, InitialBackoff: 10 * time.Millisecond, MaxBackoff: time.Second, Jitter: 0.5}, false},
		{"no limit", subscription.RetryPolicy{MaxAttempts: -1}, subscription.RetryPolicy{}, true},
		{"negative backoff", subscription.RetryPolicy{InitialBackoff: -1}, subscription.RetryPolicy{}, true},
		{"negative age", subscription.RetryPolicy{MaxAge: -1}, subscription.RetryPolicy{}, true},
		{"jitter above 1", subscription.RetryPolicy{Jitter: 1.5}, subscription.RetryPolicy{}, true},
	} {
		got, err := tc.in.WithDefaults(def)
		if tc.err {
			if !errors.Is(err, varve.ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestRetryGiveUp(t *testing.T) {
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		p        subscription.RetryPolicy
		attempts int
		next     time.Duration
		want     bool
	}{
		{"under the attempts", subscription.RetryPolicy{MaxAttempts: 3}, 2, time.Hour, false},
		{"at the attempts", subscription.RetryPolicy{MaxAttempts: 3}, 3, 0, true},
		{"no attempt limit, under the age", subscription.RetryPolicy{MaxAttempts: -1, MaxAge: time.Minute}, 100, time.Minute, false},
		{"past the age", subscription.RetryPolicy{MaxAttempts: -1, MaxAge: time.Minute}, 2, time.Minute + 1, true},
		{"age before attempts", subscription.RetryPolicy{MaxAttempts: 10, MaxAge: time.Second}, 2, 2 * time.Second, true},
	} {
		if got := tc.p.GiveUp(tc.attempts, first, first.Add(tc.next)); got != tc.want {
			t.Errorf("%s: GiveUp %v, want %v", tc.name, got, tc.want)
		}
	}
}
