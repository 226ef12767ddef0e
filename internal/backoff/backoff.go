// Package backoff holds varve's one retry delay: a capped exponential
// back-off with jitter, and a sleep that ends with its context.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exponential is a capped exponential back-off: the delay before retry n
// (n >= 1) is Initial·2^(n-1), at most Max, less a random share of it of up
// to Jitter (0 to 1; 1 is "full jitter").
type Exponential struct {
	Initial, Max time.Duration
	Jitter       float64
}

// Delay returns the delay before retry n.
func (e Exponential) Delay(n int) time.Duration {
	d := e.Initial
	for i := 1; i < n && d < e.Max; i++ {
		d *= 2
	}
	d = min(d, e.Max)
	if e.Jitter > 0 && d > 0 {
		d -= time.Duration(rand.Float64() * e.Jitter * float64(d))
	}
	return max(d, 1)
}

// Sleep waits d, or until ctx ends and returns its error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
