package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
)

func soakCmd() *cobra.Command {
	var (
		cfg      lab.SoakConfig
		c        common
		limit    string
		minSlope string
		rate     int
	)
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run a sustained workload and show whether memory stays flat",
		Long: `soak runs commands on accounts (load, modify, save), stream reads and a $all
follower on a store for --duration while it samples heap, live heap, RSS, GC and
goroutines every --interval. In sustained mode the oldest streams are deleted whenever
more than --prune-above events are live, so the data set reaches a steady state; in
discovery mode nothing is pruned and the run stops when the live heap reaches 90% of
--memory-limit. The verdict fits a line through the live heap and the RSS over the
second half of the run and flags growth above --threshold percent of the mean per
10 minutes. A second half shorter than a minute, or of fewer than 10 samples, gives
"insufficient data": run at least 2 minutes for a verdict.
Row: the commands, with their latency. Exit code 1 when memory grew, or on errors.` + storeHelp,
		Example: `  varve soak --duration 10m
  varve soak --store memory --duration 3m --rate 2000 --html soak.html
  varve soak --mode discovery --memory-limit 256MiB --duration 30m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.out.validate(); err != nil {
				return err
			}
			n, err := parseBytes(limit)
			if err != nil {
				return usage(fmt.Errorf("--memory-limit: %w", err))
			}
			cfg.MemoryLimit = n
			floor, err := parseBytes(minSlope)
			if err != nil {
				return usage(fmt.Errorf("--min-slope: %w", err))
			}
			cfg.MinSlope = float64(floor)
			if cfg.Mode != lab.Sustained && cfg.Mode != lab.Discovery {
				return usagef("--mode %q: want %s or %s", cfg.Mode, lab.Sustained, lab.Discovery)
			}
			for _, v := range []struct {
				name        string
				val, lo, hi int
			}{
				{"workers", cfg.Workers, 1, maxWorkers}, {"aggregates", cfg.Aggregates, 1, maxUsers},
				{"prune-above", cfg.PruneAbove, 1, maxPruneAbove}, {"rate", rate, 0, maxRate},
			} {
				if err := countFlag(v.name, v.val, v.lo, v.hi); err != nil {
					return err
				}
			}
			if err := durationFlag("duration", c.duration, false); err != nil {
				return err
			}
			if err := durationFlag("interval", cfg.Interval, false); err != nil {
				return err
			}
			if cfg.ThresholdPct < 0 {
				return usagef("--threshold %g: want 0 (any growth above --min-slope) or more", cfg.ThresholdPct)
			}
			cfg.Duration, cfg.Rate = c.duration, rate
			targets, err := resolveStores("soak", c.stores, false, c.keep)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg.Store, cfg.Label = targets[0].URL, targets[0].Label
			cfg.Progress = progressTo(cmd)
			env := lab.NewEnvelope("soak")
			env.Config = soakConfig{Mode: cfg.Mode, Duration: cfg.Duration, MemoryLimit: cfg.MemoryLimit, PruneAbove: cfg.PruneAbove,
				Workers: cfg.Workers, Rate: cfg.Rate, Aggregates: cfg.Aggregates, Interval: cfg.Interval, ThresholdPct: cfg.ThresholdPct,
				MinSlope: cfg.MinSlope, Keep: c.keep}
			announce(cmd.ErrOrStderr(), targets)
			rep, runErr := lab.RunSoak(ctx, cfg)
			finishStores(ctx, env, targets)
			runError(ctx, env, runErr)
			r := report{env: env,
				text: func(w io.Writer) error { return lab.PrintSoak(w, rep) },
				html: func(w io.Writer) error { return lab.WriteSoakHTML(w, rep) },
			}
			if len(rep.Samples) > 0 {
				env.Results = []lab.Row{rep.Row()}
				env.Details = lab.SoakDetails{MemoryLimit: rep.MemoryLimit, PruneAbove: rep.PruneAbove, Verdict: rep.Verdict, Samples: rep.Samples}
			}
			if rep.Verdict.Status == lab.Growing && !rep.Interrupted {
				r.failures = append(r.failures, "memory did not stay flat")
			}
			return finish(cmd, &c.out, r)
		},
	}
	f := cmd.Flags()
	c.storeFlag(f, false)
	f.StringVar(&cfg.Mode, "mode", lab.Sustained, "sustained (prune to a steady state) or discovery (no pruning, stop near the memory limit)")
	f.DurationVarP(&c.duration, "duration", "d", 5*time.Minute, "how long to run")
	f.IntVarP(&rate, "rate", "r", 0, fmt.Sprintf("cap on commands per second over all workers, at most %s (0: no cap)", group(maxRate)))
	f.StringVar(&limit, "memory-limit", "512MiB", "soft memory limit for the Go runtime (bytes, or with KiB/MiB/GiB); 0: leave the runtime's limit alone")
	f.IntVar(&cfg.PruneAbove, "prune-above", 20_000, "live events above which the oldest streams are deleted (sustained mode)")
	f.IntVarP(&cfg.Workers, "workers", "w", 4, fmt.Sprintf("goroutines running commands, at most %s", group(maxWorkers)))
	f.IntVar(&cfg.Aggregates, "aggregates", 1000, "accounts the commands pick from")
	f.DurationVar(&cfg.Interval, "interval", time.Second, "memory sampling interval")
	f.Float64Var(&cfg.ThresholdPct, "threshold", 1, "flag growth above this percent of the mean per 10 minutes; 0: any growth above --min-slope")
	f.StringVar(&minSlope, "min-slope", "16KiB", "never flag growth below this many bytes per minute: a live heap of 1 MiB wobbles by +-100 KiB between collections")
	c.out.register(f, true)
	return cmd
}

// soakConfig is soak's config in the envelope.
type soakConfig struct {
	Mode         string        `json:"mode"`
	Duration     time.Duration `json:"duration_ns"`
	MemoryLimit  int64         `json:"memory_limit"`
	PruneAbove   int           `json:"prune_above"`
	Workers      int           `json:"workers"`
	Rate         int           `json:"rate"`
	Aggregates   int           `json:"aggregates"`
	Interval     time.Duration `json:"interval_ns"`
	ThresholdPct float64       `json:"threshold_pct"`
	MinSlope     float64       `json:"min_slope_bytes_per_min"`
	Keep         bool          `json:"keep"`
}

// parseBytes parses "512MiB", "1GiB", "64KiB", "1000000" or "0".
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<50 {
		return 0, fmt.Errorf("size %q: want bytes, optionally with KiB, MiB or GiB", s)
	}
	return n * mult, nil
}
