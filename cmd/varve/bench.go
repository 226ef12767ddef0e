package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/lab"
	"github.com/varve-go/varve/lab/workload"
)

func benchCmd() *cobra.Command {
	var (
		cfg      lab.BenchConfig
		asJSON   bool
		htmlFile string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the shared benchmark workloads on stores, each against its raw baseline",
		Long: `bench runs the workloads of the shared benchmark suite (the same as the Go
benchmarks of backend/backendtest) on each store in turn. Before and after a
store's workloads it measures the store's raw baseline (a bare mutex+slice for
memory, a bare INSERT for SQLite and PostgreSQL, a raw JetStream publish for
NATS) and prints every figure also as a ratio to it.

Workloads: ` + strings.Join(workload.Names(), ", ") + `;
groups: suite (the default), scale, all.

A progress line goes to stderr while it runs. Ctrl-C stops the run and still
prints what was measured; a second Ctrl-C ends the process at once.`,
		Example: `  varve bench
  varve bench --store memory: --store postgres://postgres@127.0.0.1:5432/test --store nats://127.0.0.1:4222
  varve bench --workload scale --html report.html
  varve bench --workload append-single --workload load-100 --events 10000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			defer context.AfterFunc(ctx, func() { signal.Reset(os.Interrupt, syscall.SIGTERM) })()
			cfg.Progress = cmd.ErrOrStderr()
			rep, runErr := lab.Bench(ctx, cfg)
			if rep == nil {
				return runErr
			}
			var err error
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = lab.PrintBench(cmd.OutOrStdout(), rep)
			}
			if err != nil {
				return fmt.Errorf("print report: %w", err)
			}
			if htmlFile != "" {
				if err := writeHTML(htmlFile, rep); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", htmlFile)
			}
			if runErr != nil {
				return fmt.Errorf("%w (the report holds what was measured before)", runErr)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&cfg.Stores, "store", nil, "store URL, repeatable; stores run one after the other (default "+strings.Join(lab.DefaultBenchStores, ", ")+")")
	f.StringArrayVar(&cfg.Workloads, "workload", nil, "workload or group name, repeatable (default suite)")
	f.IntVar(&cfg.Events, "events", 0, fmt.Sprintf("budget of events (or ops) per workload and baseline (default %d; scale workloads %d on memory, %d elsewhere)",
		lab.DefaultBenchEvents, lab.DefaultScaleEventsMemory, lab.DefaultScaleEvents))
	f.DurationVar(&cfg.Duration, "duration", 0, fmt.Sprintf("time cap per workload and baseline (default %v, none for scale workloads; negative: none)", lab.DefaultBenchDuration))
	f.BoolVar(&asJSON, "json", false, "print the report as JSON instead of tables")
	f.StringVar(&htmlFile, "html", "", "also write a self-contained HTML report with charts to this file")
	return cmd
}

func writeHTML(name string, rep *lab.BenchReport) error {
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	if err := lab.WriteBenchHTML(f, rep); err != nil {
		_ = f.Close()
		return fmt.Errorf("html report %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("html report %s: %w", name, err)
	}
	return nil
}
