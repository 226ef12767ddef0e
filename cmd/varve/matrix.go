package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
)

func matrixCmd() *cobra.Command {
	var (
		c       common
		streams int
		mixes   string
		workers = newIntList(1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
	)
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Measure point reads and writes for read/write mixes x worker counts",
		Long: `matrix fills a store with --streams streams, then for every read/write mix and
worker count measures point reads (the last event of a random stream) and point
writes (an append to a random stream) for --duration each, and prints their
rates and latencies. Each cell is measured in two halves, one in a pass up
through the worker counts and one in a pass back down, so that the store growing
with the writes does not favour the cells measured first.
Rows: one per cell and operation (reads, writes); the ratio is the cell's total
rate over the best of its mix, so --check 'ratio>=0.8' asks that no worker count
falls below 80% of the best.` + storeHelp,
		Example: `  varve matrix
  varve matrix --store memory --streams 100000 --workers 1,8,64 --duration 2s
  varve matrix --mix 90/10 --workers 1,2,4 --html matrix.html --check 'p99<10ms'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.out.validate(); err != nil {
				return err
			}
			cfg := lab.MatrixConfig{Streams: streams, Rate: c.rate, Duration: c.duration, Progress: cmd.ErrOrStderr()}
			var err error
			if cfg.Mixes, err = lab.ParseMixes(mixes); err != nil {
				return usage(fmt.Errorf("--mix: %w", err))
			}
			if len(cfg.Mixes) > maxListValues {
				return usagef("--mix: %d mixes, at most %d", len(cfg.Mixes), maxListValues)
			}
			if err := firstError(countFlag("streams", streams, 1, maxStreams), checkInts(workers, "workers", 1, maxWorkers),
				durationFlag("duration", c.duration, false), rateFlag(c.rate)); err != nil {
				return err
			}
			cfg.Workers = workers.vals
			targets, err := resolveStores("matrix", c.stores, false, c.keep)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg.Store, cfg.Label = targets[0].URL, targets[0].Label
			env := lab.NewEnvelope("matrix")
			env.Config = matrixConfig{Streams: streams, Mixes: mixes, Workers: workers.vals, Duration: c.duration, Rate: c.rate, Keep: c.keep}
			announce(cmd.ErrOrStderr(), targets)
			rep, runErr := lab.RunMatrix(ctx, cfg)
			finishStores(ctx, env, targets)
			runError(ctx, env, runErr)
			env.Results = rep.Rows()
			return finish(cmd, &c.out, report{
				env:  env,
				text: func(w io.Writer) error { return lab.PrintMatrix(w, rep) },
				html: func(w io.Writer) error { return lab.WriteMatrixHTML(w, rep) },
			})
		},
	}
	f := cmd.Flags()
	c.storeFlag(f, false)
	f.IntVar(&streams, "streams", 10_000, fmt.Sprintf("streams to fill before the run, one event each, at most %s", group(maxStreams)))
	f.StringVar(&mixes, "mix", "100/0,90/10,50/50,10/90,0/100", "read/write mixes in percent, comma-separated")
	f.VarP(workers, "workers", "w", fmt.Sprintf("worker (goroutine) counts, comma-separated, each at most %s", group(maxWorkers)))
	c.limitFlags(f, time.Second, "measuring time per cell", "cap on a cell's ops per second over its workers")
	c.out.register(f, true)
	return cmd
}

// matrixConfig is matrix's config in the envelope.
type matrixConfig struct {
	Streams  int           `json:"streams"`
	Mixes    string        `json:"mixes"`
	Workers  []int         `json:"workers"`
	Duration time.Duration `json:"duration_per_cell_ns"`
	Rate     float64       `json:"rate"`
	Keep     bool          `json:"keep"`
}
