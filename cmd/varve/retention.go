package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/retention"
)

// maxRetentionAge bounds --max-age: a century.
const maxRetentionAge = 100 * 365 * 24 * time.Hour

const retentionHelp = `

A policy applies to one stream (--stream) or to every stream of a category (--category:
the stream ids up to their first "-"); a stream's own policy replaces its category's,
and --exempt gives a stream of a category no limit. The limits combine: --max-age
removes the events before the first one recorded within that time, --max-count keeps
the last N events, --before removes the versions below V. A stream's last event stays
unless --allow-empty; a truncated stream keeps its version. Policies are kept in the
store itself (the system stream "$retention"); the scavenger (package retention, or
varve retention run) applies them, truncating streams as varve streams truncate does:
readers of $all and consumers lose no event that a policy keeps.`

func retentionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "Set, list and remove retention policies; run the scavenger that applies them",
		Long:  `retention keeps streams to policies of age, count and version.` + retentionHelp + opsStoreHelp,
	}
	cmd.AddCommand(retentionListCmd(), retentionSetCmd(), retentionRemoveCmd(), retentionRunCmd())
	return cmd
}

// targetFlags are --stream and --category, one of them required.
type targetFlags struct{ stream, category string }

func (t *targetFlags) register(f *pflag.FlagSet) {
	f.StringVar(&t.stream, "stream", "", "the stream the policy applies to")
	f.StringVar(&t.category, "category", "", `the category the policy applies to: every stream whose id is it or begins with it and the category separator`)
}

// target checks the flags: one of them, a valid target.
func (t *targetFlags) target(sep string) (retention.Target, error) {
	if (t.stream == "") == (t.category == "") {
		return retention.Target{}, usagef("give --stream or --category, one of them")
	}
	target := retention.Target{Stream: t.stream, Category: t.category}
	if err := target.Check(sep); err != nil {
		return target, usage(err)
	}
	return target, nil
}

// retentionListJSON is what retention list --json prints: the policies and
// the report of the last pass recorded (null when there is none).
type retentionListJSON struct {
	Policies   []retention.Rule  `json:"policies"`
	LastReport *retention.Report `json:"last_report"`
}

func retentionListCmd() *cobra.Command {
	var (
		store string
		out   opsOutput
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the retention policies and the last pass of the scavenger",
		Long:  `list prints each policy, categories first, and what the last pass of the scavenger did.` + retentionHelp + opsStoreHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			res := retentionListJSON{Policies: []retention.Rule{}}
			s, err := openStore(ctx, t.URL)
			if err == nil {
				var rules []retention.Rule
				if rules, err = retention.List(ctx, s); err == nil {
					res.Policies = append(res.Policies, rules...)
					var last retention.Report
					var ok bool
					if last, ok, err = retention.LastReport(ctx, s); ok {
						res.LastReport = &last
					}
				}
				s.Close()
			}
			return out.finish(cmd, err, opsResult{
				value: res,
				text:  func(w io.Writer) error { return printRetention(w, res) },
				csv:   func(w io.Writer) error { return writeRetentionCSV(w, res.Policies) },
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	out.register(f, true)
	return cmd
}

func targetKind(t retention.Target) (kind, name string) {
	if t.Category != "" {
		return "category", t.Category
	}
	return "stream", t.Stream
}

func printRetention(w io.Writer, res retentionListJSON) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tPOLICY\tUPDATED")
	for _, r := range res.Policies {
		kind, name := targetKind(r.Target)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", kind, termtext.Escape(name), r.Policy, r.UpdatedAt.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d policies\n", len(res.Policies))
	if res.LastReport == nil {
		_, err := fmt.Fprintln(w, "no pass of the scavenger recorded")
		return err
	}
	r := res.LastReport
	_, err := fmt.Fprintf(w, "last pass %s by %s: %s\n", r.Finished.Format(time.RFC3339), termtext.Escape(r.Holder), passSummary(*r))
	return err
}

// passSummary is a report in a line.
func passSummary(r retention.Report) string { return summary(r, "truncated", "removed") }

// summary is a report in a line, with the words of what was done.
func summary(r retention.Report, truncated, removed string) string {
	s := fmt.Sprintf("%d streams with a policy, %d %s, %d events %s, %d errors", r.Streams, r.Truncated, truncated, r.Removed, removed, r.Errors)
	if r.Reclaimed > 0 {
		s += fmt.Sprintf(", %d bytes given back", r.Reclaimed)
	}
	if r.Incomplete {
		s += " (incomplete: the next pass goes on)"
	}
	return s
}

func writeRetentionCSV(w io.Writer, rules []retention.Rule) error {
	cw := newCSV(w)
	cw.row("kind", "name", "max_age", "max_count", "truncate_before", "allow_empty", "updated_at")
	for _, r := range rules {
		kind, name := targetKind(r.Target)
		age := ""
		if r.Policy.MaxAge > 0 {
			age = r.Policy.MaxAge.String()
		}
		cw.row(kind, name, age, strconv.FormatInt(r.Policy.MaxCount, 10), strconv.FormatUint(r.Policy.TruncateBefore, 10),
			strconv.FormatBool(r.Policy.AllowEmpty), r.UpdatedAt.Format(time.RFC3339Nano))
	}
	return cw.flush()
}

func retentionSetCmd() *cobra.Command {
	var (
		store              string
		target             targetFlags
		maxAge             time.Duration
		maxCount           int64
		before             uint64
		allowEmpty, exempt bool
		out                opsOutput
	)
	cmd := &cobra.Command{
		Use:   "set (--stream ID | --category NAME) [--max-age D] [--max-count N] [--before V] [--allow-empty] | --exempt",
		Short: "Give a stream or a category a retention policy, replacing the one it had",
		Long: `set gives the target a policy: at least one of --max-age, --max-count and --before, or
--exempt for none (a stream spared by its category's policy). It removes nothing by
itself: the scavenger's next pass does.` + retentionHelp + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			tg, err := target.target(storeConfig(cmd.Context()).CategorySeparator)
			if err != nil {
				return err
			}
			fl := cmd.Flags()
			if fl.Changed("max-age") && maxAge == 0 || fl.Changed("max-count") && maxCount == 0 || fl.Changed("before") && before == 0 {
				return usagef("a limit of 0 is no limit: leave the flag out")
			}
			limits := maxAge != 0 || maxCount != 0 || before != 0
			switch {
			case exempt && (limits || allowEmpty):
				return usagef("--exempt gives no limit: it takes none of --max-age, --max-count, --before and --allow-empty")
			case !exempt && !limits:
				return usagef("give a limit (--max-age, --max-count, --before) or --exempt")
			case maxAge < 0 || maxAge > maxRetentionAge:
				return usagef("--max-age %v: want a positive duration (such as 720h) up to %v", maxAge, maxRetentionAge)
			case maxCount < 0:
				return usagef("--max-count %d: want at least 1", maxCount)
			}
			p := retention.Policy{MaxAge: maxAge, MaxCount: maxCount, TruncateBefore: before, AllowEmpty: allowEmpty}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			rule := retention.Rule{Target: tg, Policy: p}
			s, err := openStore(ctx, t.URL)
			if err == nil {
				if err = retention.Set(ctx, s, tg, p); err == nil {
					rule, err = ruleOf(ctx, s, tg)
				}
				s.Close()
			}
			return out.finish(cmd, err, opsResult{
				value: rule,
				text: func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "the policy of %s is %s (the scavenger's next pass applies it)\n", termtext.Escape(tg.String()), p)
					return err
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	target.register(f)
	f.DurationVar(&maxAge, "max-age", 0, "remove the events older than this, such as 720h (the first one within it and those after it stay)")
	f.Int64Var(&maxCount, "max-count", 0, "keep the last N events")
	f.Uint64Var(&before, "before", 0, "remove the events with versions below this one")
	f.BoolVar(&allowEmpty, "allow-empty", false, "let the limits remove a stream's last event too")
	f.BoolVar(&exempt, "exempt", false, "no limit: spare the stream from its category's policy")
	out.register(f, false)
	return cmd
}

// ruleOf returns the rule of target as the store keeps it.
func ruleOf(ctx context.Context, s *varve.Store, target retention.Target) (retention.Rule, error) {
	rules, err := retention.List(ctx, s)
	if err != nil {
		return retention.Rule{}, err
	}
	for _, r := range rules {
		if r.Target == target {
			return r, nil
		}
	}
	return retention.Rule{}, fmt.Errorf("%s: %w (removed since it was set?)", target, retention.ErrNoPolicy)
}

func retentionRemoveCmd() *cobra.Command {
	var (
		store  string
		target targetFlags
		out    opsOutput
	)
	cmd := &cobra.Command{
		Use:   "remove (--stream ID | --category NAME)",
		Short: "Take a stream's or a category's retention policy away",
		Long: `remove takes the target's policy away: the scavenger removes nothing more by it. A
target without a policy is an error (exit 1).` + retentionHelp + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			tg, err := target.target(storeConfig(cmd.Context()).CategorySeparator)
			if err != nil {
				return err
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := openStore(ctx, t.URL)
			if err == nil {
				err = retention.Remove(ctx, s, tg)
				s.Close()
			}
			kind, name := targetKind(tg)
			return out.finish(cmd, err, opsResult{
				value: map[string]string{kind: name, "action": "removed"},
				text: func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "removed the policy of %s\n", termtext.Escape(tg.String()))
					return err
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	target.register(f)
	out.register(f, false)
	return cmd
}

func retentionRunCmd() *cobra.Command {
	var (
		store     string
		dryRun    bool
		every     time.Duration
		maxRemove int64
		out       opsOutput
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the scavenger: one pass, or one every --every until interrupted",
		Long: `run makes a pass of the scavenger: it truncates every stream with a policy to what its
policy keeps, at most --max-remove events in a pass (a pass that stops there says so,
and the next goes on), gives the space back where the backend needs asking (SQLite),
and records its report (retention list shows the last one). --dry-run says what a pass
would remove and removes nothing. A pass holds the store's lease "varve.retention",
so that one scavenger runs at a time; a pass that finds it held by another fails.
--every D makes a pass every D until interrupted, a line (or with --json a JSON
object) per pass, as a service would. A pass that failed on a stream exits 1.` + retentionHelp + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if maxRemove < 1 {
				return usagef("--max-remove %d: want at least 1", maxRemove)
			}
			if cmd.Flags().Changed("every") {
				if err := durationFlag("every", every, false); err != nil {
					return err
				}
				if out.csv != "" || out.json != "" && out.json != "-" {
					return usagef("--every prints to stdout: --json without a file")
				}
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := openStore(ctx, t.URL)
			if err != nil {
				return out.finish(cmd, err, opsResult{})
			}
			defer s.Close()
			cfg := retention.Config{Store: s, DryRun: dryRun, MaxRemove: maxRemove}
			if every > 0 {
				return retentionEvery(cmd, cfg, every, out.json == "-")
			}
			sc, err := retention.New(cfg)
			if err != nil {
				return err
			}
			rep, err := sc.ScavengeOnce(ctx)
			var failed error
			if err == nil && rep.Errors > 0 {
				failed = fmt.Errorf("the pass failed on %d streams or targets", rep.Errors)
			}
			return out.finish(cmd, err, opsResult{
				value:  rep,
				text:   func(w io.Writer) error { return printPass(w, rep, dryRun) },
				failed: failed,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.BoolVar(&dryRun, "dry-run", false, "say what a pass would remove; remove nothing")
	f.DurationVar(&every, "every", 0, "make a pass every this long until interrupted")
	f.Int64Var(&maxRemove, "max-remove", retention.DefaultMaxRemove, "remove at most this many events in a pass")
	out.register(f, false)
	return cmd
}

// retentionEvery runs the scavenger every interval until the command is
// interrupted, printing a line per pass (a JSON object with asJSON).
func retentionEvery(cmd *cobra.Command, cfg retention.Config, every time.Duration, asJSON bool) error {
	w := cmd.OutOrStdout()
	enc := json.NewEncoder(termtext.JSONWriter(w))
	var failed error
	cfg.Interval = every
	cfg.Hooks.AfterPass = func(r retention.Report, err error) {
		if cmd.Context().Err() != nil {
			return
		}
		switch {
		case asJSON && err == nil:
			_ = enc.Encode(r)
		case asJSON:
			_ = enc.Encode(map[string]string{"error": err.Error()})
		case err != nil:
			fmt.Fprintf(w, "%s pass failed: %s\n", time.Now().UTC().Format(time.RFC3339), termtext.Escape(err.Error()))
		default:
			fmt.Fprintf(w, "%s %s\n", r.Finished.Format(time.RFC3339), passSummary(r))
		}
		if err == nil && r.Errors > 0 {
			failed = fmt.Errorf("a pass failed on %d streams or targets", r.Errors)
		}
	}
	sc, err := retention.New(cfg)
	if err != nil {
		return err
	}
	if err := sc.Run(cmd.Context()); err != nil {
		return err
	}
	if errors.Is(context.Cause(cmd.Context()), errInterrupted) {
		return &exitError{code: exitInterrupted, err: errInterrupted, quiet: true}
	}
	return failed
}

// printPass prints a pass's report.
func printPass(w io.Writer, r retention.Report, dryRun bool) error {
	what, line := "pass", passSummary(r)
	if dryRun {
		what, line = "dry run (nothing removed)", summary(r, "to truncate", "to remove")
	}
	fmt.Fprintf(w, "%s by %s, %s to %s: %s\n", what, termtext.Escape(r.Holder), r.Started.Format(time.RFC3339), r.Finished.Format(time.RFC3339), line)
	if len(r.Truncations) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STREAM\tBEFORE\tREMOVED")
		for _, tr := range r.Truncations {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", termtext.Escape(tr.Stream), tr.Before, tr.Removed)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if r.Truncated > len(r.Truncations) {
			fmt.Fprintf(w, "(the first %d of %d truncations)\n", len(r.Truncations), r.Truncated)
		}
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "error: %s\n", termtext.Escape(p))
	}
	if r.Errors > len(r.Problems) {
		fmt.Fprintf(w, "(and %d more errors)\n", r.Errors-len(r.Problems))
	}
	return nil
}
