package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
)

func loadtestCmd() *cobra.Command {
	cfg := lab.DefaultLoadtestConfig()
	var c common
	cmd := &cobra.Command{
		Use:   "loadtest",
		Short: "Run an aggregate's load/modify/save cycle and measure it",
		Long: `loadtest runs load/modify/save cycles of an event-sourced "user" aggregate
spread over --users aggregates, with snapshots and the aggregate cache on or off,
and reports cycles/s, the cycle latency, store calls and server requests per
cycle, and memory. A progress line per --batch cycles goes to stderr.
Rows: one per store; with --baseline the ratio is cycles/s over bare appends/s.

Every knob is also an environment variable (in brackets); a flag given on the
command line wins over the variable.` + storeHelp,
		Example: `  varve loadtest
  BACKEND=memory N=10000 varve loadtest
  SNAPSHOT=false CACHE=true varve loadtest --workers 4
  varve loadtest --store memory --store sqlite --ops 0 --duration 10s --rate 500
  varve loadtest --store nats --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadtestEnv(cmd, &cfg, &c); err != nil {
				return err
			}
			if err := c.out.validate(); err != nil {
				return err
			}
			if err := firstError(countFlag("ops", cfg.Ops, 0, maxEvents), countFlag("users", cfg.Users, 1, maxUsers),
				countFlag("batch", cfg.Batch, 1, maxEvents), countFlag("workers", cfg.Workers, 1, maxWorkers),
				countFlag("snapshot-every", cfg.SnapshotEvery, 1, maxEvents), countFlag("cache-size", cfg.CacheSize, 1, maxUsers)); err != nil {
				return err
			}
			if cfg.Codec != "json" && cfg.Codec != "gojson" {
				return usagef("--codec %q: want json or gojson", cfg.Codec)
			}
			if err := firstError(durationFlag("duration", c.duration, true), rateFlag(c.rate)); err != nil {
				return err
			}
			if cfg.Ops == 0 && c.duration == 0 {
				return usagef("--ops 0 runs until --duration, which is 0: give one of them")
			}
			cfg.Duration, cfg.Rate = c.duration, c.rate
			targets, err := resolveStores("loadtest", c.stores, true, c.keep)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			env := lab.NewEnvelope("loadtest")
			env.Config = cfg
			announce(cmd.ErrOrStderr(), targets)
			var results []lab.LoadtestResult
			for _, t := range targets {
				run := cfg
				run.Store, run.Label = t.URL, t.Label
				res, err := lab.Loadtest(ctx, run, cmd.ErrOrStderr())
				if res.Backend != "" || res.Ops > 0 {
					results = append(results, res)
				} else {
					runError(ctx, env, err)
				}
				if ctx.Err() != nil {
					break
				}
			}
			finishStores(ctx, env, targets)
			rows := []lab.Row{}
			for _, r := range results {
				rows = append(rows, r.Row())
			}
			env.Results = rows
			return finish(cmd, &c.out, report{
				env: env,
				text: func(w io.Writer) error {
					for i, r := range results {
						if i > 0 {
							fmt.Fprintln(w)
						}
						if err := lab.PrintLoadtestResult(w, r); err != nil {
							return err
						}
					}
					return nil
				},
				html: func(w io.Writer) error { return lab.WriteLoadtestHTML(w, results) },
			})
		},
	}
	f := cmd.Flags()
	c.storeFlag(f, true)
	f.IntVarP(&cfg.Ops, "ops", "n", cfg.Ops, fmt.Sprintf("load/modify/save cycles, at most %s; 0: no budget, run until --duration [N]", group(maxEvents)))
	c.limitFlags(f, 0, "time cap of the run; 0: none [DURATION]", "cap on cycles per second over all workers [RATE]")
	f.IntVarP(&cfg.Users, "users", "u", cfg.Users, "distinct aggregates [U]")
	f.IntVarP(&cfg.Batch, "batch", "b", cfg.Batch, "cycles per progress line [B]")
	f.BoolVar(&cfg.Snapshots, "snapshot", cfg.Snapshots, "take and use snapshots [SNAPSHOT]")
	f.IntVar(&cfg.SnapshotEvery, "snapshot-every", cfg.SnapshotEvery, "events between snapshots [SNAPSHOT_EVERY]")
	f.BoolVar(&cfg.Cache, "cache", cfg.Cache, "keep loaded aggregates in an LRU cache [CACHE]")
	f.IntVar(&cfg.CacheSize, "cache-size", cfg.CacheSize, "aggregates the cache holds [CACHE_SIZE]")
	f.BoolVar(&cfg.LoadAfterSave, "load-after-save", cfg.LoadAfterSave, "reload each saved aggregate from the store and compare; a difference is an error [LOAD_AFTER_SAVE]")
	f.IntVarP(&cfg.Workers, "workers", "w", cfg.Workers, fmt.Sprintf("concurrent workers, each with its own users, at most %s [WORKERS]", group(maxWorkers)))
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the choice of users [SEED]")
	f.StringVar(&cfg.Codec, "codec", cfg.Codec, "codec of events and snapshots: json (encoding/json) or gojson (github.com/goccy/go-json, the same JSON, faster) [CODEC]")
	f.BoolVar(&cfg.Baseline, "baseline", cfg.Baseline, "also time bare appends of the same events, the floor of a cycle [BASELINE]")
	c.out.register(f, true)
	// The store's variable is BACKEND, as in the scripts this command
	// replaces.
	f.Lookup("store").Usage += " [BACKEND]"
	return cmd
}

// loadtestEnv reads the environment variables into the knobs whose flags
// were not given.
func loadtestEnv(cmd *cobra.Command, cfg *lab.LoadtestConfig, c *common) error {
	ints := []struct {
		env, flag string
		dst       *int
	}{
		{"N", "ops", &cfg.Ops}, {"U", "users", &cfg.Users}, {"B", "batch", &cfg.Batch},
		{"SNAPSHOT_EVERY", "snapshot-every", &cfg.SnapshotEvery}, {"CACHE_SIZE", "cache-size", &cfg.CacheSize},
		{"WORKERS", "workers", &cfg.Workers},
	}
	for _, v := range ints {
		if s, ok := envFor(cmd, v.env, v.flag); ok {
			n, err := strconv.ParseInt(s, 0, 0)
			if err != nil {
				return usagef("%s=%q: want an integer", v.env, s)
			}
			*v.dst = int(n)
		}
	}
	bools := []struct {
		env, flag string
		dst       *bool
	}{{"SNAPSHOT", "snapshot", &cfg.Snapshots}, {"CACHE", "cache", &cfg.Cache}, {"LOAD_AFTER_SAVE", "load-after-save", &cfg.LoadAfterSave}, {"BASELINE", "baseline", &cfg.Baseline}}
	for _, v := range bools {
		if s, ok := envFor(cmd, v.env, v.flag); ok {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return usagef("%s=%q: want true or false", v.env, s)
			}
			*v.dst = b
		}
	}
	if s, ok := envFor(cmd, "SEED", "seed"); ok {
		n, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return usagef("SEED=%q: want an unsigned integer", s)
		}
		cfg.Seed = n
	}
	if s, ok := envFor(cmd, "DURATION", "duration"); ok {
		if err := cmd.Flags().Set("duration", s); err != nil {
			return usagef("DURATION=%q: want a duration such as 30s", s)
		}
	}
	if s, ok := envFor(cmd, "RATE", "rate"); ok {
		if err := cmd.Flags().Set("rate", s); err != nil {
			return usagef("RATE=%q: want a number", s)
		}
	}
	if s, ok := envFor(cmd, "BACKEND", "store"); ok {
		c.stores = []string{s}
	}
	return nil
}

// envFor returns the variable env unless the flag was given.
func envFor(cmd *cobra.Command, env, flag string) (string, bool) {
	if cmd.Flags().Changed(flag) {
		return "", false
	}
	s, ok := os.LookupEnv(env)
	s = strings.TrimSpace(s)
	return s, ok && s != ""
}
