package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/internal/workload"
)

func benchCmd() *cobra.Command {
	var (
		c         common
		workloads []string
		events    int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the shared benchmark workloads on stores, each against its raw baseline",
		Long: `bench runs the workloads of the shared benchmark suite (the same as the Go
benchmarks of backend/backendtest) on each store in turn. Before and after a
store's workloads it measures the store's raw write baseline (a bare mutex+slice
for memory, a bare INSERT for SQLite and PostgreSQL, a raw JetStream publish for
NATS) and prints the figures of every workload that writes also as a ratio to it
(on PostgreSQL the 8-writer workloads to a bare INSERT from 8 connections at once).
Rows: one per workload and store; the ratio is the throughput over the baseline's.

Workloads: ` + strings.Join(workload.Names(), ", ") + `;
groups: suite (the default), commands (the command bus against a direct Execute),
storage (bytes on disk per event of 100 bytes: the store's size after VACUUM on
PostgreSQL or a WAL checkpoint on SQLite, before and after the appends), scale, all.

A progress line goes to stderr while it runs.` + storeHelp,
		Example: `  varve bench
  varve bench --store sqlite --store memory --store postgres --store nats
  varve bench --workload scale --html report.html
  varve bench --store sqlite --store postgres --store nats --workload storage --json
  varve bench --workload append-single --workload load-100 --events 10000 --json
  varve bench --workload append-single --check 'p99<20ms' --check 'ratio>=0.5'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.out.validate(); err != nil {
				return err
			}
			cfg := lab.BenchConfig{Workloads: workloads, Rate: c.rate, Progress: cmd.ErrOrStderr()}
			if cmd.Flags().Changed("events") {
				if err := countFlag("events", events, 1, maxEvents); err != nil {
					return err
				}
				cfg.Events = events
			}
			if cmd.Flags().Changed("duration") {
				if err := durationFlag("duration", c.duration, true); err != nil {
					return err
				}
				cfg.Duration = c.duration
				if c.duration == 0 {
					cfg.Duration = -1 // no cap
				}
			}
			if err := rateFlag(c.rate); err != nil {
				return err
			}
			if _, err := workload.Select(workloads); err != nil {
				return usage(fmt.Errorf("--workload: %w", err))
			}
			targets, err := resolveStores("bench", c.stores, true, c.keep)
			if err != nil {
				return err
			}
			cfg.Stores = targets
			ctx := cmd.Context()
			env := lab.NewEnvelope("bench")
			env.Config = newBenchConfig(cfg, c.keep)
			announce(cmd.ErrOrStderr(), targets)
			rep, runErr := lab.Bench(ctx, cfg)
			finishStores(ctx, env, targets)
			runError(ctx, env, runErr)
			r := report{env: env}
			if rep != nil {
				env.Results, env.Details = rep.Rows(), rep.Details()
				env.Errors = append(env.Errors, rep.Errors()...)
				r.text = func(w io.Writer) error { return lab.PrintBench(w, rep) }
				r.html = func(w io.Writer) error { return lab.WriteBenchHTML(w, rep) }
			}
			return finish(cmd, &c.out, r)
		},
	}
	f := cmd.Flags()
	c.storeFlag(f, true)
	f.StringArrayVar(&workloads, "workload", nil, "workload or group name, repeatable (default suite)")
	f.IntVar(&events, "events", 0, fmt.Sprintf("budget of events (or ops) per workload and baseline, at most %s (default %s; scale workloads %s on memory, %s elsewhere)",
		group(maxEvents), group(lab.DefaultBenchEvents), group(lab.DefaultScaleEventsMemory), group(lab.DefaultScaleEvents)))
	c.limitFlags(f, 0, fmt.Sprintf("time cap per workload and baseline; 0: none (default %v, none for scale workloads)", lab.DefaultBenchDuration),
		"cap on each workload's ops per second over its workers")
	f.Lookup("duration").DefValue = lab.DefaultBenchDuration.String()
	c.out.register(f, true)
	return cmd
}

// benchConfig is bench's config in the envelope: the budgets and caps as
// they took effect (0: none; events 0: each workload's default).
type benchConfig struct {
	Workloads     []string      `json:"workloads"`
	Events        int           `json:"events"`
	Duration      time.Duration `json:"duration_ns"`
	ScaleDuration time.Duration `json:"scale_duration_ns"`
	Rate          float64       `json:"rate"`
	Keep          bool          `json:"keep"`
}

func newBenchConfig(cfg lab.BenchConfig, keep bool) benchConfig {
	bc := benchConfig{Workloads: cfg.Workloads, Events: cfg.Events, Rate: cfg.Rate, Keep: keep}
	switch {
	case cfg.Duration > 0:
		bc.Duration, bc.ScaleDuration = cfg.Duration, cfg.Duration
	case cfg.Duration == 0:
		bc.Duration = lab.DefaultBenchDuration
	}
	if bc.Workloads == nil {
		bc.Workloads = []string{"suite"}
	}
	return bc
}
