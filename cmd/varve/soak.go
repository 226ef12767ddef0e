package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/cmd/varve/internal/soakweb"
)

func soakCmd() *cobra.Command {
	var (
		cfg      lab.SoakConfig
		c        common
		limit    string
		minSlope string
		rate     int
		browser  bool
		listen   string
		hard     string
		capHow   string
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
second half of the run and flags growth when the lower end of the slope's 95% interval
is above --threshold percent of the mean per 10 minutes (and --min-slope). A second
half shorter than a minute, or of fewer than 10 samples, gives "insufficient data":
run at least 2 minutes for a verdict.
With --browser the same workload runs on the memory backend inside a browser page as
WebAssembly: soak builds the module with the go tool (run it from a varve checkout),
serves the page on --listen (loopback only) and prints the address; open it, start the
run there. The module sets --memory-limit with debug.SetMemoryLimit (0: none, and
discovery runs until the module cannot grow its memory). The page posts every sample
here, so a run whose tab died still has its figures: soak writes the same reports as
natively (table, JSON, HTML; environment "browser") when the page reports the result or
the module's exit, when it has posted nothing for ten intervals (at least 30 s), or on
Ctrl-C; in discovery they give the ceiling (last live heap, events held, rate).
With --hard-limit soak runs its own command line (without --hard-limit) as a child
process under a hard memory cap of that size: a new memory cgroup (v2, memory.max under
the unified hierarchy; else v1, /sys/fs/cgroup/memory; both need root), else an
address-space limit (RLIMIT_AS: the child's start-up mappings plus the cap; --cap
chooses). It reports the cap's figures (peak usage) and how the child ended: survived,
out-of-memory kill, allocation failure. A child that died wrote no report: soak writes
it from the samples the child recorded, its last figures as the ceiling.
Row: the commands, with their latency. Exit code 1 when memory grew in sustained mode, or on errors.` + storeHelp,
		Example: `  varve soak --duration 10m
  varve soak --store memory --duration 3m --rate 2000 --html soak.html
  varve soak --mode discovery --memory-limit 256MiB --duration 30m
  varve soak --hard-limit 128MiB --memory-limit 96MiB --duration 20s
  varve soak --browser --mode discovery --memory-limit 2GiB --duration 1h`,
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
			if err := firstError(countFlag("workers", cfg.Workers, 1, maxWorkers), countFlag("aggregates", cfg.Aggregates, 1, maxUsers),
				countFlag("prune-above", cfg.PruneAbove, 1, maxPruneAbove), countFlag("rate", rate, 0, maxRate),
				durationFlag("duration", c.duration, false), durationFlag("interval", cfg.Interval, false)); err != nil {
				return err
			}
			if cfg.ThresholdPct < 0 {
				return usagef("--threshold %g: want 0 (any growth above --min-slope) or more", cfg.ThresholdPct)
			}
			cfg.Duration, cfg.Rate = c.duration, rate
			if hard != "" {
				return soakCapped(cmd, &c, cfg, hard, capHow, limit)
			}
			if browser {
				return soakBrowser(cmd, &c, listen, cfg)
			}
			targets, err := resolveStores("soak", c.stores, false, c.keep)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			cfg.Store, cfg.Label = targets[0].URL, targets[0].Label
			cfg.Progress = cmd.ErrOrStderr()
			cfg.Environment = os.Getenv(soakEnvironment)
			if _, err := applyAddressLimit(); err != nil {
				return fmt.Errorf("the capped soak's address-space limit: %w", err)
			}
			if path := os.Getenv(soakRecord); path != "" {
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					return fmt.Errorf("the capped soak's record: %w", err)
				}
				defer f.Close()
				cfg.Record = f
			}
			env := soakEnvelope(cfg, c.keep, cfg.Environment)
			announce(cmd.ErrOrStderr(), targets)
			rep, runErr := lab.RunSoak(ctx, cfg)
			finishStores(ctx, env, targets)
			runError(ctx, env, runErr)
			return soakReport(cmd, &c, env, rep, nil)
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
	f.StringVar(&hard, "hard-limit", "", "run the soak as a child process under a hard memory cap of this size (like 128MiB or 512MiB; Linux): see --cap")
	f.StringVar(&capHow, "cap", capAuto, "with --hard-limit, how to cap: auto (the first that works of the next three), cgroup-v2, cgroup-v1 (both need root) or address-space (RLIMIT_AS)")
	f.BoolVar(&browser, "browser", false, "run the workload in a browser page as WebAssembly on the memory backend (see above)")
	f.StringVar(&listen, "listen", "127.0.0.1:0", "with --browser: the loopback address to serve the page on")
	c.out.register(f, true)
	return cmd
}

// ending is how a capped soak's child ended.
type ending struct {
	// died is set when the child did not end the run itself (a signal, or
	// a Go runtime fatal error), so it wrote no report.
	died bool
	// how says it in words.
	how  string
	code int
}

// soakCapped re-runs this command line without --hard-limit and --cap as
// a child process under a hard memory cap and reports how it ended. A
// child that ends the run writes its own reports; for one that died (an
// out-of-memory kill, an allocation failure) this process writes them from
// the samples the child recorded, with the last figures as its ceiling.
func soakCapped(cmd *cobra.Command, c *common, cfg lab.SoakConfig, hard, how, soft string) error {
	n, err := parseBytes(hard)
	if err != nil || n < 16<<20 {
		return usagef("--hard-limit %q: want a size of at least 16MiB, like 128MiB", hard)
	}
	if how != capAuto && how != capCgroupV2 && how != capCgroupV1 && how != capAddressSpace {
		return usagef("--cap %q: want %s, %s, %s or %s", how, capAuto, capCgroupV2, capCgroupV1, capAddressSpace)
	}
	if s, err := parseBytes(soft); err == nil && s >= n {
		fmt.Fprintf(cmd.ErrOrStderr(), "varve: --memory-limit %s is not below --hard-limit %s: the runtime will not collect before the kernel kills\n", soft, hard)
	}
	var args []string
	for i := 1; i < len(os.Args); i++ {
		switch a := os.Args[i]; {
		case a == "--hard-limit" || a == "--cap":
			i++
		case strings.HasPrefix(a, "--hard-limit="), strings.HasPrefix(a, "--cap="):
		default:
			args = append(args, a)
		}
	}
	record, err := os.CreateTemp("", "varve-soak-record-")
	if err != nil {
		return err
	}
	defer os.Remove(record.Name())
	defer record.Close()
	env, end, err := capped(args, how, n, record.Name(), cmd.OutOrStdout(), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if !end.died {
		if end.code != 0 {
			return &exitError{code: end.code, err: fmt.Errorf("capped soak ended with exit code %d", end.code), quiet: true}
		}
		return nil
	}
	rec, err := lab.ReadRecord(record)
	if err != nil {
		return fmt.Errorf("read the capped soak's record: %w", err)
	}
	store := "sqlite"
	if len(c.stores) > 0 {
		store = lab.Redact(c.stores[0])
	}
	rep := lab.SoakReport{Store: store, Environment: env, Mode: cfg.Mode, Duration: cfg.Duration, Rate: cfg.Rate, Workers: cfg.Workers,
		MemoryLimit: cfg.MemoryLimit, PruneAbove: cfg.PruneAbove, Machine: lab.Machine(), Ended: end.how,
		StopReason: "the process died: " + end.how}
	rep = lab.SoakFromRecord(rep, rec, cfg.ThresholdPct, cfg.MinSlope, cfg.MinSpan)
	return soakReport(cmd, c, soakEnvelope(cfg, c.keep, env), rep, []string{"capped soak: " + end.how})
}

// soakBrowser builds the WebAssembly soak, serves its page on a loopback
// address and waits for the page to report the end of the run (its result,
// or the module's exit), for the page to fall quiet (the tab died) or for
// Ctrl-C, then reports the run from the samples the page posted.
func soakBrowser(cmd *cobra.Command, c *common, listen string, cfg lab.SoakConfig) error {
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usagef("--listen %q: want a loopback host:port, like 127.0.0.1:8080", listen)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("soak --browser builds its module with the go command: %w", err)
	}
	ctx := cmd.Context()
	dir, err := os.MkdirTemp("", "varve-soak-browser-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintln(cmd.ErrOrStderr(), "building the WebAssembly module...")
	m, err := soakweb.Build(ctx, goTool, dir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := soakweb.NewServer(m)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	q := url.Values{"mode": {cfg.Mode}, "duration": {strconv.FormatFloat(cfg.Duration.Seconds(), 'f', -1, 64)},
		"limit_mib": {strconv.FormatInt(cfg.MemoryLimit>>20, 10)}, "prune_above": {strconv.Itoa(cfg.PruneAbove)},
		"rate": {strconv.Itoa(cfg.Rate)}, "workers": {strconv.Itoa(cfg.Workers)}, "aggregates": {strconv.Itoa(cfg.Aggregates)},
		"interval_ms": {strconv.FormatInt(cfg.Interval.Milliseconds(), 10)}, "threshold": {strconv.FormatFloat(cfg.ThresholdPct, 'f', -1, 64)},
		"min_slope": {strconv.FormatFloat(cfg.MinSlope, 'f', -1, 64)}}
	fmt.Fprintf(cmd.ErrOrStderr(), "open http://%s/?%s in a browser and start the run; Ctrl-C stops serving\n", ln.Addr(), q.Encode())
	// A tab killed for lack of memory posts nothing more: after a quiet
	// spell of ten sampling intervals (at least 30 s) the run counts as
	// ended.
	quiet := max(30*time.Second, 10*cfg.Interval)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-srv.Done():
			break wait
		case err := <-served:
			return fmt.Errorf("serve the page: %w", err)
		case <-tick.C:
			if q := srv.Quiet(); q > quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "the page has posted nothing for %v: reporting its last figures\n", q.Round(time.Second))
				break wait
			}
		}
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shut)
	rep, err := srv.Report(cfg)
	if err != nil {
		return err
	}
	return soakReport(cmd, c, soakEnvelope(cfg, false, rep.Environment), rep, nil)
}

// soakEnvelope starts a soak's envelope, with its config.
func soakEnvelope(cfg lab.SoakConfig, keep bool, environment string) *lab.Envelope {
	env := lab.NewEnvelope("soak")
	env.Config = soakConfig{Mode: cfg.Mode, Duration: cfg.Duration, MemoryLimit: cfg.MemoryLimit, PruneAbove: cfg.PruneAbove,
		Workers: cfg.Workers, Rate: cfg.Rate, Aggregates: cfg.Aggregates, Interval: cfg.Interval, ThresholdPct: cfg.ThresholdPct,
		MinSlope: cfg.MinSlope, Keep: keep, Environment: environment}
	return env
}

// soakReport writes a soak's report (table, JSON envelope, HTML) into env
// the one way for every environment; failures adds reasons for exit code 1.
func soakReport(cmd *cobra.Command, c *common, env *lab.Envelope, rep lab.SoakReport, failures []string) error {
	r := report{env: env,
		text:     func(w io.Writer) error { return lab.PrintSoak(w, rep) },
		html:     func(w io.Writer) error { return lab.WriteSoakHTML(w, rep) },
		failures: failures,
	}
	if len(rep.Samples) > 0 {
		env.Results = []lab.Row{rep.Row()}
		env.Details = lab.SoakDetails{MemoryLimit: rep.MemoryLimit, PruneAbove: rep.PruneAbove, Verdict: rep.Verdict, Samples: rep.Samples,
			Environment: rep.Environment, Ended: rep.Ended, Ceiling: rep.Ceiling}
	}
	if grewWrongly(rep) {
		r.failures = append(r.failures, "memory did not stay flat")
	}
	return finish(cmd, &c.out, r)
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
	Environment  string        `json:"environment,omitempty"`
}

// soakEnvironment is the variable a capped soak's parent names the
// child's environment in, for its reports.
const soakEnvironment = "VARVE_SOAK_ENVIRONMENT"

// soakRecord is the variable a capped soak's parent names the file in
// where the child appends every sample ([lab.SoakConfig.Record]), for the
// report after a kill.
const soakRecord = "VARVE_SOAK_RECORD"

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

// grewWrongly reports whether a soak's memory growth fails the run: a
// sustained run that was not interrupted and whose verdict is growing. A
// discovery run never prunes, so it grows by design.
func grewWrongly(rep lab.SoakReport) bool {
	return rep.Mode != lab.Discovery && rep.Verdict.Status == lab.Growing && !rep.Interrupted
}
