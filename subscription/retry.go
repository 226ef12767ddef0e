package subscription

import (
	"fmt"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/backoff"
)

// RetryPolicy says how often and for how long a consumer tries again what
// failed before it gives up on it: a delivery then parks the event, a
// projection treats it as poison. Package delivery and package projection
// both take it; the zero value gives the consumer's defaults.
type RetryPolicy struct {
	// MaxAttempts gives up after this many failed attempts; negative for
	// no limit (then set MaxAge).
	MaxAttempts int
	// MaxAge gives up on what would be tried again later than this after
	// its first attempt; 0 for no limit.
	MaxAge time.Duration
	// InitialBackoff is the delay before the second attempt; each later
	// delay doubles, up to MaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// Jitter takes a random fraction of up to Jitter off each delay, so
	// that retries of many failures spread out; negative for none.
	Jitter float64
}

// WithDefaults returns r with each zero field taken from d. It fails with
// varve.ErrInvalidArgument for a negative duration, a jitter above 1, or
// neither limit (no MaxAttempts and no MaxAge).
func (r RetryPolicy) WithDefaults(d RetryPolicy) (RetryPolicy, error) {
	if r.InitialBackoff < 0 || r.MaxBackoff < 0 || r.MaxAge < 0 || r.Jitter > 1 {
		return r, fmt.Errorf("%w: retry policy: negative duration or jitter above 1", varve.ErrInvalidArgument)
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = d.MaxAttempts
	}
	if r.MaxAge == 0 {
		r.MaxAge = d.MaxAge
	}
	if r.MaxAttempts <= 0 && r.MaxAge == 0 {
		return r, fmt.Errorf("%w: retry policy: no limit on attempts nor age", varve.ErrInvalidArgument)
	}
	if r.InitialBackoff == 0 {
		r.InitialBackoff = d.InitialBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = d.MaxBackoff
	}
	r.MaxBackoff = max(r.MaxBackoff, r.InitialBackoff)
	if r.Jitter == 0 {
		r.Jitter = d.Jitter
	}
	r.Jitter = max(r.Jitter, 0)
	return r, nil
}

// Delay is the delay after the attempt-th failed attempt (1 for the first).
func (r RetryPolicy) Delay(attempt int) time.Duration {
	return backoff.Exponential{Initial: r.InitialBackoff, Max: r.MaxBackoff, Jitter: r.Jitter}.Delay(attempt)
}

// GiveUp reports whether what failed attempts times, the first at first,
// is given up rather than tried again at next.
func (r RetryPolicy) GiveUp(attempts int, first, next time.Time) bool {
	return r.MaxAttempts > 0 && attempts >= r.MaxAttempts || r.MaxAge > 0 && next.Sub(first) > r.MaxAge
}
