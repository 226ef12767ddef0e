package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
)

func TestLoadtest(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		snap, cache bool
		workers     int
	}{
		{false, false, 1}, {true, false, 1}, {false, true, 1}, {true, true, 1},
		{true, false, 3}, {true, true, 3},
	} {
		t.Run(fmt.Sprintf("snapshot=%v/cache=%v/workers=%d", tc.snap, tc.cache, tc.workers), func(t *testing.T) {
			cfg := DefaultLoadtestConfig()
			cfg.Store, cfg.Ops, cfg.Users, cfg.Batch, cfg.Workers = "mem", 1200, 20, 400, tc.workers
			cfg.Snapshots, cfg.Cache, cfg.LoadAfterSave, cfg.SnapshotEvery, cfg.Baseline = tc.snap, tc.cache, true, 7, true
			var progress bytes.Buffer
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			res, err := Loadtest(ctx, cfg, &progress)
			if err != nil {
				t.Fatal(err)
			}
			s := res.Repository
			if res.Ops != cfg.Ops || res.Verified != cfg.Ops || res.Mismatches != 0 || s.Saves != uint64(cfg.Ops) {
				t.Fatalf("ops %d, verified %d, mismatches %d, saves %d; want %d verified and saved, 0 mismatches", res.Ops, res.Verified, res.Mismatches, s.Saves, cfg.Ops)
			}
			if res.Workers != tc.workers || s.Conflicts != 0 {
				t.Fatalf("%d workers, %d conflicts; want %d workers owning their users, no conflicts", res.Workers, s.Conflicts, tc.workers)
			}
			if l := res.Latency; res.OpsPerSec <= 0 || l.P50 <= 0 || l.P99 < l.P50 || l.Samples != int64(cfg.Ops) || res.StoreCalls == 0 || res.BaselineOpsPerSec <= 0 || res.CycleCost <= 0 || res.Stopped != "budget" {
				t.Fatalf("figures not filled in: %+v", res)
			}
			if got := strings.Count(progress.String(), "ops/s"); got != cfg.Ops/cfg.Batch {
				t.Fatalf("%d progress lines, want %d:\n%s", got, cfg.Ops/cfg.Batch, progress.String())
			}
			if !tc.snap && (s.SnapshotsLoaded != 0 || s.SnapshotsSaved != 0) {
				t.Fatalf("snapshots off, but %d loaded and %d saved", s.SnapshotsLoaded, s.SnapshotsSaved)
			}
			if tc.snap && (s.SnapshotsSaved == 0 || s.SnapshotsLoaded == 0) {
				t.Fatalf("snapshots on, but %d loaded and %d saved", s.SnapshotsLoaded, s.SnapshotsSaved)
			}
			if tc.cache && s.CacheHits < uint64(cfg.Ops-cfg.Users) {
				t.Fatalf("cache on, but %d hits for %d ops over %d users", s.CacheHits, cfg.Ops, cfg.Users)
			}
			var out bytes.Buffer
			if err := PrintLoadtestResult(&out, res); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Avg rate:", "p50", "p90", "p99", "max", "samples", "Store calls/op:", "Requests/op:     n/a", "0 mismatches", "Final memory:", "Baseline:"} {
				if !strings.Contains(out.String(), want) {
					t.Fatalf("results lack %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestLoadtestRejectsBadConfig(t *testing.T) {
	for _, mutate := range []func(*LoadtestConfig){
		func(c *LoadtestConfig) { c.Ops = -1 },
		func(c *LoadtestConfig) { c.Ops, c.Duration = 0, 0 },
		func(c *LoadtestConfig) { c.Users = -1 },
		func(c *LoadtestConfig) { c.Batch = 0 },
		func(c *LoadtestConfig) { c.Workers = 0 },
		func(c *LoadtestConfig) { c.Rate = -1 },
		func(c *LoadtestConfig) { c.Store = "bogus://x" },
	} {
		cfg := DefaultLoadtestConfig()
		cfg.Store = "mem"
		mutate(&cfg)
		if _, err := Loadtest(t.Context(), cfg, nil); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("config %+v: %v, want ErrInvalidArgument", cfg, err)
		}
	}
}

// TestLoadtestLimits: a run without a budget ends at its time cap, a rate
// cap holds the cycles back, and an interrupted run keeps what completed.
func TestLoadtestLimits(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := DefaultLoadtestConfig()
	cfg.Ops, cfg.Duration, cfg.Rate, cfg.Users, cfg.Batch = 0, 300*time.Millisecond, 100, 10, 10
	res, err := Loadtest(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 100 cycles/s for 0.3 s is about 30 cycles; the first turn comes at
	// once, so at most 31 and, on a slow machine, fewer.
	if res.Stopped != "duration" || res.Ops == 0 || res.Ops > 31 || res.Latency.Samples != int64(res.Ops) {
		t.Fatalf("stopped %q after %d cycles (%d samples); want duration after at most 31", res.Stopped, res.Ops, res.Latency.Samples)
	}

	// Interrupted once the progress shows a batch of cycles done, so that
	// something ran however slow the machine.
	ctx, cancel := context.WithCancel(t.Context())
	cfg = DefaultLoadtestConfig()
	cfg.Ops, cfg.Users, cfg.Batch = 1<<30, 10, 10
	res, err = Loadtest(ctx, cfg, cancelOnProgress(cancel))
	if !errors.Is(err, context.Canceled) || res.Stopped != "interrupted" || res.Ops == 0 {
		t.Fatalf("interrupted run: %v, stopped %q after %d cycles", err, res.Stopped, res.Ops)
	}
}

// cancelOnProgress is a progress writer that calls cancel at the first
// line of a batch of cycles done.
type cancelOnProgress context.CancelFunc

func (c cancelOnProgress) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(" ops | ")) {
		c()
	}
	return len(p), nil
}
