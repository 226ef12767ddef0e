package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/lab"
)

func deliverBenchCmd() *cobra.Command {
	cfg := lab.DeliverConfig{}
	var (
		latencies []float64
		ordering  string
		asJSON    bool
		html      string
	)
	cmd := &cobra.Command{
		Use:   "deliver-bench",
		Short: "Measure concurrent ordered delivery to a loopback HTTP sink (seed 002's matrix)",
		Long: `deliver-bench fills a store with T commits of E events over a number of streams, then
for every sink latency L and concurrency C delivers all of it from the beginning: a
subscription, a dispatcher (per-stream order and checkpoints on by default) and the
signed webhook sink, to an HTTP endpoint on loopback that sleeps L per request.
Efficiency is events/s divided by the ideal C/L.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := delivery.ParseOrdering(ordering)
			if err != nil {
				return err
			}
			cfg.Ordering = o
			for _, l := range latencies {
				cfg.Latencies = append(cfg.Latencies, time.Duration(l*float64(time.Millisecond)))
			}
			if !asJSON {
				cfg.Log = cmd.ErrOrStderr()
			}
			rs, err := lab.DeliverBench(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if html != "" {
				f, err := os.Create(html)
				if err != nil {
					return err
				}
				if err := lab.WriteDeliverHTML(f, rs); err != nil {
					f.Close()
					return fmt.Errorf("write %s: %w", html, err)
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rs)
			}
			return lab.PrintDeliverTable(cmd.OutOrStdout(), rs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Store, "store", "memory:", "store URL")
	f.IntVarP(&cfg.Transactions, "transactions", "t", 10000, "commits (T)")
	f.IntVarP(&cfg.EventsPerTx, "events-per-tx", "e", 4, "events per commit (E)")
	f.Float64SliceVarP(&latencies, "latency-ms", "l", []float64{10, 50}, "sink latencies in ms (L)")
	f.IntSliceVarP(&cfg.Concurrency, "concurrency", "c", []int{1, 5, 10, 25, 50, 100, 250}, "concurrency levels (C)")
	f.StringVar(&ordering, "ordering", "per-stream", "ordering: per-stream or none")
	f.IntVar(&cfg.Streams, "streams", 1000, "distinct streams the commits go to (at random)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the stream choice")
	f.IntVar(&cfg.Window, "window", 0, "pending events the dispatcher may hold (0: 64 per worker, at least 1024)")
	f.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", time.Second, "how often the checkpoint is saved")
	f.StringSliceVar(&cfg.Sinks, "sink", []string{"http"}, "what to measure: http (the webhook sink to a loopback endpoint); baselines: func (a Go handler that sleeps L, no HTTP), raw-http (a bare HTTP client loop, no store or dispatcher)")
	f.IntVar(&cfg.Poison, "poison", 0, "streams whose requests always fail with 500 (retried, then parked)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&html, "html", "", "also write the charts to this HTML file")
	return cmd
}
