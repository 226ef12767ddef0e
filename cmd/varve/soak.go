package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/lab"
)

func soakCmd() *cobra.Command {
	var (
		cfg      lab.SoakConfig
		limit    string
		minSlope string
		asJSON   bool
		htmlFile string
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
10 minutes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := parseBytes(limit)
			if err != nil {
				return err
			}
			cfg.MemoryLimit = n
			floor, err := parseBytes(minSlope)
			if err != nil {
				return err
			}
			cfg.MinSlope = float64(floor)
			if !asJSON {
				cfg.Progress = cmd.OutOrStdout()
			} else {
				cfg.Progress = cmd.ErrOrStderr()
			}
			rep, err := lab.RunSoak(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return report(cmd, rep, asJSON, htmlFile,
				func(w io.Writer) error { return lab.PrintSoak(w, rep) },
				func(w io.Writer) error { return lab.WriteSoakHTML(w, rep) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Store, "store", defaultStore, "store URL")
	f.StringVar(&cfg.Mode, "mode", lab.Sustained, "sustained (prune to a steady state) or discovery (no pruning, stop near the memory limit)")
	f.DurationVar(&cfg.Duration, "duration", 5*time.Minute, "how long to run")
	f.StringVar(&limit, "memory-limit", "512MiB", "soft memory limit for the Go runtime (bytes, or with KiB/MiB/GiB)")
	f.IntVar(&cfg.PruneAbove, "prune-above", 20_000, "live events above which the oldest streams are deleted (sustained mode)")
	f.IntVar(&cfg.Workers, "workers", 4, "goroutines running commands")
	f.IntVar(&cfg.Rate, "rate", 0, "cap on commands per second over all workers (0: as fast as the store goes)")
	f.IntVar(&cfg.Aggregates, "aggregates", 1000, "accounts the commands pick from")
	f.DurationVar(&cfg.Interval, "interval", time.Second, "memory sampling interval")
	f.Float64Var(&cfg.ThresholdPct, "threshold", 1, "flag growth above this percent of the mean per 10 minutes")
	f.StringVar(&minSlope, "min-slope", "16KiB", "never flag growth below this many bytes per minute: a live heap of 1 MiB wobbles by +-100 KiB between collections, which made 10-minute flat runs show 5 KiB/min of apparent slope")
	f.StringVar(&htmlFile, "html", "", "also write a self-contained HTML report with charts to this file")
	f.BoolVar(&asJSON, "json", false, "print JSON (progress goes to stderr)")
	return cmd
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
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want bytes, optionally with KiB, MiB or GiB", s)
	}
	return n * mult, nil
}
