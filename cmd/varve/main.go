// Command varve runs varve's lab against any store: bench, loadtest,
// deliver-bench, matrix and soak measure. Its operator commands work on a
// store as it is: serve runs the HTTP API and web console (package
// server), init creates a store, append appends an event, streams and all
// read streams and $all (streams truncate, delete and tombstone change a
// stream's life), subs shows consumers and moves checkpoints, parked
// lists, replays and skips the events a delivery subscription parked,
// projections lists projections and pauses, resumes or rebuilds them, cdc
// manages the slots of change data capture, retention keeps streams to
// policies of age and count. The lab commands share one
// flag vocabulary (--check, --html, ...) and one JSON envelope; an
// operator command takes none of the lab's flags and its --json prints
// plain JSON of what it lists or did. All share one exit-code contract;
// docs/lab.md describes them, `varve help` lists them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1   // errors in the run, or checks not met
	exitUsage       = 2   // bad flags, arguments or store URLs
	exitInterrupted = 130 // SIGINT or SIGTERM; partial results printed
)

// stopGrace is how long a run may take to stop after a signal before the
// process exits anyway.
const stopGrace = 10 * time.Second

// errInterrupted is the cause of the context of an interrupted run.
var errInterrupted = errors.New("interrupted")

func main() {
	ctx, stop := interruptible(os.Stderr)
	defer stop()
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interruptible returns a context that ends at the first SIGINT or
// SIGTERM with errInterrupted as its cause. A second signal, or a run that
// has not stopped within stopGrace, ends the process with exit code 130.
func interruptible(stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case s := <-sigs:
			fmt.Fprintf(stderr, "\nvarve: %v: stopping, partial results follow (signal again to exit at once)\n", s)
			cancel(errInterrupted)
		}
		grace := time.NewTimer(stopGrace)
		defer grace.Stop()
		select {
		case <-done:
		case <-sigs:
			fmt.Fprintln(stderr, "varve: exiting at once")
			os.Exit(exitInterrupted)
		case <-grace.C:
			fmt.Fprintf(stderr, "varve: the run did not stop within %v; exiting\n", stopGrace)
			os.Exit(exitInterrupted)
		}
	}()
	stopped := false
	return ctx, func() {
		if !stopped {
			stopped = true
			signal.Stop(sigs)
			close(done)
		}
	}
}

// execute runs the CLI with args and returns its exit code; the error, if
// any, goes to stderr.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	started := false
	root := rootCmd(&started)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	code := exitCode(ctx, err, started)
	if err != nil {
		var ee *exitError
		if !errors.As(err, &ee) || !ee.quiet {
			fmt.Fprintln(stderr, "varve:", errorText(err))
		}
		if code == exitUsage {
			fmt.Fprintln(stderr, "varve: run 'varve help' or 'varve COMMAND --help' for usage")
		}
	}
	return code
}

// errorText is err's text for stderr, scrubbed of secrets and escaped for
// a terminal (termtext.Escape): a line per error when errors.Join joined
// them, and every other line break escaped, since an error may carry the
// text of a store or a remote party.
func errorText(err error) string {
	if ee, ok := err.(*exitError); ok {
		err = ee.err
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var lines []string
		for _, e := range j.Unwrap() {
			lines = append(lines, errorText(e))
		}
		return strings.Join(lines, "\n")
	}
	// The store's errors begin with "varve: ", which execute prints first.
	return termtext.Escape(lab.Scrub(strings.TrimPrefix(err.Error(), "varve: ")))
}

func exitCode(ctx context.Context, err error, started bool) int {
	if errors.Is(context.Cause(ctx), errInterrupted) {
		return exitInterrupted
	}
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if !started {
		return exitUsage // cobra refused the command line before any command ran
	}
	return exitFailed
}

// exitError carries an exit code; quiet ones have printed their story.
type exitError struct {
	code  int
	err   error
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usage marks err as a usage error: exit code 2.
func usage(err error) error { return &exitError{code: exitUsage, err: err} }

// usagef is usage with a formatted message.
func usagef(format string, args ...any) error { return usage(fmt.Errorf(format, args...)) }

// separatorKey keys the --category-separator in a command's context.
type separatorKey struct{}

// storeConfig is the store configuration of the commands that run with
// ctx: the category separator of --category-separator.
func storeConfig(ctx context.Context) varve.Config {
	sep, _ := ctx.Value(separatorKey{}).(string)
	return varve.Config{CategorySeparator: sep}
}

func rootCmd(started *bool) *cobra.Command {
	root := &cobra.Command{
		Use:   "varve",
		Short: "varve's lab and operator tools: measure an event store, look at one, serve it",
		Long: `varve measures the varve event store on any backend (SQLite, memory, PostgreSQL,
NATS JetStream) with its lab commands, and operates a store with the others: creates
one (varve init), appends events, lists streams and consumers, truncates, deletes and
tombstones streams, tails $all, moves checkpoints, manages the events a delivery
subscription parked, keeps streams to retention policies, and serves the HTTP API and
web console (varve serve).

The lab commands share one vocabulary: --store, -w/--workers, -d/--duration,
-r/--rate, --json (the JSON envelope), --csv, --html and --check. The operator
commands take --store (else $VARVE_STORE; a bare path is a SQLite file) and --json
(plain JSON of what they list or did), --csv on a listing, and alert with bounds such
as subs ls --max-lag N. Exit codes: 0 success; 1 errors in the run, a --check not met
or a --max-* bound exceeded; 2 bad usage; 130 interrupted. docs/lab.md has the details and the JSON shapes.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var cpuProfile, sep string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	root.PersistentFlags().StringVar(&sep, "category-separator", varve.DefaultCategorySeparator,
		"the category separator of the application's store (varve.Config.CategorySeparator): a stream's category ends at it")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		probe, err := varve.New(memory.New(), varve.Config{CategorySeparator: sep}) // the store's own rules
		if err != nil {
			return usage(fmt.Errorf("--category-separator: %w", err))
		}
		_ = probe.Close()
		cmd.SetContext(context.WithValue(cmd.Context(), separatorKey{}, sep))
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return usage(fmt.Errorf("--cpuprofile: %w", err))
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		cmd.PersistentPostRunE = func(*cobra.Command, []string) error {
			pprof.StopCPUProfile()
			return f.Close()
		}
		return nil
	}
	root.SetFlagErrorFunc(labFlagError)
	root.AddCommand(versionCmd(), benchCmd(), loadtestCmd(), deliverBenchCmd(), parkedCmd(), matrixCmd(), soakCmd())
	root.AddCommand(serveCmd(), streamsCmd(), allCmd(), subsCmd(), cdcCmd(), projectionsCmd(), initCmd(), appendCmd(), retentionCmd(), workflowsCmd())
	root.AddCommand(eraseCmd(), erasuresCmd(), keysCmd(), verifyCmd())
	groupCommands(root)
	markStarted(root, started)
	return root
}

// markStarted makes every command's RunE note that it ran: an error before
// that is cobra refusing the command line, a usage error.
func markStarted(cmd *cobra.Command, started *bool) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			*started = true
			return run(c, args)
		}
	}
	for _, sub := range cmd.Commands() {
		markStarted(sub, started)
	}
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of varve and of Go",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			version := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
				version = bi.Main.Version
			}
			bi, _ := debug.ReadBuildInfo()
			goVersion := "unknown"
			if bi != nil {
				goVersion = bi.GoVersion
			}
			fmt.Fprintf(cmd.OutOrStdout(), "varve %s (%s)\n", version, goVersion)
		},
	}
}
