package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/lab"
)

func loadtestCmd() *cobra.Command {
	cfg := lab.DefaultLoadtestConfig()
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "loadtest",
		Short: "Run seed 001's aggregate load/modify/save cycle and measure it",
		Long: `loadtest runs N load/modify/save cycles of an event-sourced "user" aggregate
spread over U aggregates, with snapshots and the aggregate cache on or off,
and prints a progress line per batch and the results: ops/s, cycle latency,
store calls and server requests per operation, memory.

Every knob is a flag and, as in seed 001, an environment variable (in
brackets); a flag given on the command line wins over the variable.
--store (BACKEND) takes mem, sqlite, nats, postgres (local defaults) or a
store URL; the default is ` + lab.DefaultLoadtestBackend + `.`,
		Example: `  varve loadtest
  BACKEND=mem N=10000 varve loadtest
  SNAPSHOT=false CACHE=true varve loadtest --workers 4
  varve loadtest --store nats --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadtestEnv(cmd, &cfg); err != nil {
				return err
			}
			progress := cmd.OutOrStdout()
			if asJSON {
				progress = cmd.ErrOrStderr()
			}
			res, err := lab.Loadtest(cmd.Context(), cfg, progress)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else if err := lab.PrintLoadtestResult(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if res.Mismatches > 0 {
				return fmt.Errorf("loadtest: %d reloaded aggregates differ from the saved ones", res.Mismatches)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&cfg.Ops, "ops", "n", cfg.Ops, "load/modify/save cycles [N]")
	f.IntVarP(&cfg.Users, "users", "u", cfg.Users, "distinct aggregates [U]")
	f.IntVarP(&cfg.Batch, "batch", "b", cfg.Batch, "cycles per progress line [B]")
	f.StringVar(&cfg.Store, "store", cfg.Store, "mem, sqlite, nats, postgres or a store URL [BACKEND]")
	f.BoolVar(&cfg.Snapshots, "snapshot", cfg.Snapshots, "take and use snapshots [SNAPSHOT]")
	f.IntVar(&cfg.SnapshotEvery, "snapshot-every", cfg.SnapshotEvery, "events between snapshots [SNAPSHOT_EVERY]")
	f.BoolVar(&cfg.Cache, "cache", cfg.Cache, "keep loaded aggregates in an LRU cache [CACHE]")
	f.IntVar(&cfg.CacheSize, "cache-size", cfg.CacheSize, "aggregates the cache holds [CACHE_SIZE]")
	f.BoolVar(&cfg.LoadAfterSave, "load-after-save", cfg.LoadAfterSave, "reload each saved aggregate from the store and compare [LOAD_AFTER_SAVE]")
	f.IntVarP(&cfg.Workers, "workers", "w", cfg.Workers, "concurrent workers, each with its own users [WORKERS]")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the choice of users [SEED]")
	f.BoolVar(&cfg.Baseline, "baseline", cfg.Baseline, "also time bare appends of the same events, the floor of a cycle [BASELINE]")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON (progress goes to stderr)")
	return cmd
}

// loadtestEnv reads seed 001's environment variables into the knobs whose
// flags were not given.
func loadtestEnv(cmd *cobra.Command, cfg *lab.LoadtestConfig) error {
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
				return fmt.Errorf("loadtest: %s=%q: want an integer", v.env, s)
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
				return fmt.Errorf("loadtest: %s=%q: want true or false", v.env, s)
			}
			*v.dst = b
		}
	}
	if s, ok := envFor(cmd, "SEED", "seed"); ok {
		n, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return fmt.Errorf("loadtest: SEED=%q: want an unsigned integer", s)
		}
		cfg.Seed = n
	}
	if s, ok := envFor(cmd, "BACKEND", "store"); ok {
		cfg.Store = s
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
