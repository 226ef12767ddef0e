// Package chaos holds what the fault drivers of internal/pgchaos and
// internal/natschaos share: the seed of a fault schedule and the
// measure of the unavailability a fault causes.
package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"
)

// SeedFromEnv returns VARVE_CHAOS_SEED, or the clock's nanoseconds.
func SeedFromEnv() (int64, error) {
	if s := os.Getenv("VARVE_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("chaos: VARVE_CHAOS_SEED %q: %w", s, err)
		}
		return v, nil
	}
	return time.Now().UnixNano(), nil
}

// Unavailable heals a fault made at at and measures the unavailability:
// the time from at to the first success of probe, which is called again
// and again (20 ms after a failure) while heal runs and after. probe gets
// a context that ends with ctx.
func Unavailable(ctx context.Context, at time.Time, heal, probe func(context.Context) error) (time.Duration, error) {
	done := make(chan time.Duration, 1)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var last error
	go func() {
		for {
			if last = probe(pctx); last == nil {
				done <- time.Since(at)
				return
			}
			select {
			case <-pctx.Done():
				done <- -1
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	if err := heal(ctx); err != nil {
		cancel()
		<-done
		return 0, err
	}
	u := <-done
	if u < 0 {
		return 0, fmt.Errorf("chaos: no probe succeeded (%w), the last failed: %w", ctx.Err(), last)
	}
	return u, nil
}
