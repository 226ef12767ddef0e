package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/delivery"
)

func deliverBenchCmd() *cobra.Command {
	cfg := lab.DeliverConfig{}
	var (
		c         common
		latencies = newMsList(10, 50)
		workers   = newIntList(1, 5, 10, 25, 50, 100, 250)
		ordering  string
	)
	cmd := &cobra.Command{
		Use:   "deliver-bench",
		Short: "Measure concurrent ordered delivery to a loopback HTTP sink",
		Long: `deliver-bench fills a store with --transactions commits of --events-per-tx events
over --streams streams, then for every sink latency L (--latency-ms) and worker
count C (--workers) delivers all of it from the beginning: a subscription, a
dispatcher (per-stream order and checkpoints on by default) and the signed
webhook sink, to an HTTP endpoint on loopback that sleeps L per request.
Efficiency is events/s divided by the ideal C/L.
Rows: one per sink, latency and worker count; the ratio is the efficiency; the
errors are events delivered out of their stream's order (per-stream ordering)
and events parked although no stream was poisoned.

With --source postgres-cdc the commits are real writes instead: --streams rows
of a table on the PostgreSQL server at --cdc-url (it must run with
wal_level=logical) take --transactions commits of --events-per-tx updates of
random rows, after a logical replication slot was created; every run captures
them while the dispatcher delivers them, so the figures include the capture.
--cdc-route direct (the default) streams a copy of the slot made for the run
straight into the dispatcher (pgcdc.Source: logical decoding, value decoding,
acknowledgements to the copy); --cdc-route store appends them to per-row
streams of a fresh memory store that the dispatcher reads (the appends too);
--cdc-route direct,store measures both in one run. The table, slots and
publication are dropped after the runs.` + storeHelp,
		Example: `  varve deliver-bench
  varve deliver-bench --latency-ms 10 --workers 1,10,100 --html deliver.html
  varve deliver-bench --sink http,func,raw-http --duration 5s --check 'ratio>=0.8'
  varve deliver-bench --source postgres-cdc --cdc-url postgres://postgres@127.0.0.1:5433/postgres --latency-ms 50 --workers 25,50,100,250 --cdc-route direct,store`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.out.validate(); err != nil {
				return err
			}
			o, err := delivery.ParseOrdering(ordering)
			if err != nil {
				return usage(fmt.Errorf("--ordering: %w", err))
			}
			cfg.Ordering = o
			if err := firstError(countFlag("transactions", cfg.Transactions, 1, maxEvents), countFlag("events-per-tx", cfg.EventsPerTx, 1, maxBatch),
				countFlag("streams", cfg.Streams, 1, maxStreams), countFlag("window", cfg.Window, 0, maxEvents),
				countFlag("poison", cfg.Poison, 0, cfg.Streams)); err != nil {
				return err
			}
			if cfg.Transactions*cfg.EventsPerTx > maxEvents {
				return usagef("--transactions x --events-per-tx is %s events: at most %s", group(cfg.Transactions*cfg.EventsPerTx), group(maxEvents))
			}
			if err := checkInts(workers, "workers", 1, maxWorkers); err != nil {
				return err
			}
			cfg.Workers = workers.vals
			if cfg.Latencies, err = msDurations(latencies, "latency-ms"); err != nil {
				return err
			}
			if err := firstError(durationFlag("checkpoint-interval", cfg.CheckpointInterval, false),
				durationFlag("duration", c.duration, true), rateFlag(c.rate)); err != nil {
				return err
			}
			for _, s := range cfg.Sinks {
				if s != "http" && s != "func" && s != "raw-http" {
					return usagef("--sink %q: want http, func or raw-http", s)
				}
			}
			switch cfg.Source {
			case lab.SourceStore:
				if cfg.CDCURL != "" {
					return usagef("--cdc-url needs --source %s", lab.SourceCDC)
				}
				if cmd.Flags().Changed("cdc-route") {
					return usagef("--cdc-route needs --source %s", lab.SourceCDC)
				}
				cfg.CDCRoutes = nil
			case lab.SourceCDC:
				if cfg.CDCURL == "" {
					return usagef("--source %s needs --cdc-url: a PostgreSQL server with wal_level=logical", lab.SourceCDC)
				}
				if len(c.stores) > 0 || cfg.Poison > 0 {
					return usagef("--source %s delivers from a memory store of its own per run: no --store, no --poison", lab.SourceCDC)
				}
				for _, r := range cfg.CDCRoutes {
					if r != lab.RouteDirect && r != lab.RouteStore {
						return usagef("--cdc-route %q: want %s or %s", r, lab.RouteDirect, lab.RouteStore)
					}
				}
			default:
				return usagef("--source %q: want %s or %s", cfg.Source, lab.SourceStore, lab.SourceCDC)
			}
			cfg.Duration, cfg.Rate = c.duration, c.rate
			targets, err := resolveStores("deliver-bench", c.stores, false, c.keep)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg.Store, cfg.Label = targets[0].URL, targets[0].Label
			cfg.Log = cmd.ErrOrStderr()
			env := lab.NewEnvelope("deliver-bench")
			env.Config = deliverConfig{cfg, cfg.Ordering.String()}
			announce(cmd.ErrOrStderr(), targets)
			rs, runErr := lab.DeliverBench(ctx, cfg)
			finishStores(ctx, env, targets)
			runError(ctx, env, runErr)
			env.Results = lab.DeliverRows(rs)
			return finish(cmd, &c.out, report{
				env:  env,
				text: func(w io.Writer) error { return lab.PrintDeliverTable(w, rs) },
				html: func(w io.Writer) error { return lab.WriteDeliverHTML(w, rs) },
			})
		},
	}
	f := cmd.Flags()
	c.storeFlag(f, false)
	f.IntVarP(&cfg.Transactions, "transactions", "t", 10_000, "commits to fill the store with")
	f.IntVarP(&cfg.EventsPerTx, "events-per-tx", "e", 4, "events per commit")
	f.VarP(latencies, "latency-ms", "l", "sink latencies in milliseconds, comma-separated")
	f.VarP(workers, "workers", "w", fmt.Sprintf("dispatcher worker counts (its concurrency), comma-separated, each at most %s", group(maxWorkers)))
	f.StringVar(&ordering, "ordering", "per-stream", "ordering: per-stream or none")
	f.IntVar(&cfg.Streams, "streams", 1000, "distinct streams the commits go to (at random)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the stream choice")
	f.IntVar(&cfg.Window, "window", 0, "pending events the dispatcher may hold; 0: 64 per worker, at least 1,024")
	f.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", time.Second, "how often the checkpoint is saved")
	f.StringSliceVar(&cfg.Sinks, "sink", []string{"http"}, "what to measure: http (the webhook sink to a loopback endpoint); baselines: func (a Go handler that sleeps L, no HTTP), raw-http (a bare HTTP client loop, no store or dispatcher)")
	f.StringVar(&cfg.Source, "source", lab.SourceStore, "where the events come from: store (appended to --store once) or postgres-cdc (real writes captured through a logical replication slot, see above)")
	f.StringVar(&cfg.CDCURL, "cdc-url", "", "with --source postgres-cdc: the PostgreSQL server (wal_level=logical) to write to and capture from")
	f.StringSliceVar(&cfg.CDCRoutes, "cdc-route", []string{lab.RouteDirect}, "with --source postgres-cdc, the routes to measure, comma-separated, each run the same way: direct (the slot's changes straight into the dispatcher, pgcdc.Source) or store (appended to per-row streams of a memory store, then a subscription)")
	f.IntVar(&cfg.Poison, "poison", 0, "streams whose requests always fail with 500 (retried, then parked)")
	c.limitFlags(f, 0, "time cap of each run; 0: none, deliver everything", "cap on deliveries per second of a run")
	c.out.register(f, true)
	return cmd
}

// deliverConfig is deliver-bench's config in the envelope.
type deliverConfig struct {
	lab.DeliverConfig
	Ordering string `json:"ordering"`
}
