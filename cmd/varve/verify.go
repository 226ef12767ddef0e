package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/internal/verify"
)

func verifyCmd() *cobra.Command {
	var (
		store            string
		cfg              verify.Config
		appendTimeoutStr time.Duration
		out              opsOutput
	)
	cmd := &cobra.Command{
		Use:   "verify [--duration D] [--writers N] [--streams N] [--seed S] [--delivery-segments N] [--projection]",
		Short: "Check the store's promises under your own faults: writers, readers, then the whole log",
		Long: `verify runs writers that append with expected versions to shared streams (so that
they conflict) and record each append as acknowledged, refused or of unknown outcome,
and readers that page through $all and through a category as the writers go; then it
reads the log once more and checks: every acknowledged event is in $all exactly once,
no refused one is, an unknown one at most once; positions increase; each stream's
versions have no gap; every reader saw its part of $all whole and in order. Kill,
pause or fail over servers while it runs: that is what it is for. It writes events of
two categories of its own ("verify<run>a", "verify<run>b") into the store, and
leaves them there. --seed replays the writers' choices.

--delivery-segments N also runs a delivery of the run's events to a handler in
this process, split into N segments under leases held by two holders (as two
processes would; the store must keep leases and list checkpoints, and keeps the
segments' checkpoints), and --projection a projection of them (its checkpoint in
memory). They run from before the writers start until they have handled the log
through its end; then every event must have been delivered at least once, each
stream's in version order (again only as a redelivery, counted), and projected
exactly once, in $all's order.

It prints the figures, the time from the first failed append to the next
acknowledged one, and the first 20 anomalies; any anomaly exits 1.` + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if cfg.Writers < 1 || cfg.Streams < 1 || cfg.Duration <= 0 || appendTimeoutStr <= 0 {
				return usagef("--writers, --streams, --duration and --append-timeout must be positive")
			}
			if err := countFlag("delivery-segments", cfg.DeliverySegments, 0, verify.MaxDeliverySegments); err != nil {
				return err
			}
			if cfg.LeaseTTL < varve.MinLeaseTTL || cfg.LeaseTTL > varve.MaxLeaseTTL {
				return usagef("--lease-ttl %s: want %s to %s", cfg.LeaseTTL, varve.MinLeaseTTL, varve.MaxLeaseTTL)
			}
			cfg.AppendTimeout = appendTimeoutStr
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var res verify.Result
			s, err := openStore(ctx, t.URL)
			if err == nil {
				res, err = verify.Run(ctx, s, cfg)
				s.Close()
			}
			var failed error
			if err == nil && !res.OK() {
				failed = fmt.Errorf("verify: %d anomalies (seed %d)", res.AnomalyCount, res.Seed)
			}
			return out.finish(cmd, err, opsResult{
				value:  res,
				failed: failed,
				text:   func(w io.Writer) error { return printVerify(w, res) },
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.IntVar(&cfg.Writers, "writers", 4, "writers appending at once")
	f.IntVar(&cfg.Streams, "streams", 8, "streams the writers share")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long the writers write")
	f.Uint64Var(&cfg.Seed, "seed", 0, "the seed of the writers' choices (0: a random one, printed)")
	f.DurationVar(&appendTimeoutStr, "append-timeout", 10*time.Second, "past this an append's outcome is unknown")
	f.IntVar(&cfg.DeliverySegments, "delivery-segments", 0, fmt.Sprintf("run a delivery of the run's events in this many segments under leases (0: none, at most %d)", verify.MaxDeliverySegments))
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", verify.DefaultLeaseTTL, "the delivery's lease ttl: segments change hands within it")
	f.BoolVar(&cfg.Projection, "projection", false, "run a projection of the run's events")
	out.register(f, false)
	return cmd
}

func printVerify(w io.Writer, r verify.Result) error {
	fmt.Fprintf(w, "run %s, seed %d, %v\n", r.Run, r.Seed, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "appends: %d acknowledged, %d refused (conflicts), %d of unknown outcome (%d of them stored)\n",
		r.Acknowledged, r.Refused, r.Unknown, r.UnknownStored)
	fmt.Fprintf(w, "$all holds %d events of the run; the readers saw %d\n", r.Events, r.ReaderEvents)
	if r.DeliveryRuns > 0 || r.Projected > 0 || r.ConsumerRestarts > 0 {
		fmt.Fprintf(w, "consumers: %d events delivered (%d of them again) by %d segment runs, %d projected; %d restarts after a failure\n",
			r.Delivered, r.Redelivered, r.DeliveryRuns, r.Projected, r.ConsumerRestarts)
	}
	for _, n := range r.NotRun {
		fmt.Fprintf(w, "not run: %s\n", termtext.Escape(n))
	}
	if r.LongestUnavailable > 0 {
		fmt.Fprintf(w, "unavailable: %v after the first failure, %v at the longest\n", r.FirstUnavailable.Round(time.Millisecond), r.LongestUnavailable.Round(time.Millisecond))
	}
	if r.OK() {
		_, err := fmt.Fprintln(w, "no anomalies")
		return err
	}
	fmt.Fprintf(w, "%d anomalies:\n", r.AnomalyCount)
	for _, a := range r.Anomalies {
		fmt.Fprintf(w, "  %s\n", termtext.Escape(a))
	}
	return nil
}
