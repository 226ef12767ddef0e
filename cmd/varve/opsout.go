package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/varve-go/varve/cmd/varve/internal/termtext"
)

// opsOutput are the output flags of an operator command: --json[=FILE]
// (what the command lists or did, as plain JSON: no envelope) and, on a
// listing, --csv[=FILE]. The lab's --check and --html are not among them.
type opsOutput struct {
	json, csv string
}

// register adds the flags; withCSV says whether the command lists rows.
func (o *opsOutput) register(f *pflag.FlagSet, withCSV bool) {
	f.StringVar(&o.json, "json", "", "print the result as plain JSON instead of the table (docs/lab.md has the shapes); --json=FILE writes it to FILE")
	f.Lookup("json").NoOptDefVal = "-"
	if withCSV {
		f.StringVar(&o.csv, "csv", "", "print the rows as CSV instead of the table; --csv=FILE writes them to FILE")
		f.Lookup("csv").NoOptDefVal = "-"
	}
}

func (o *opsOutput) validate() error {
	if o.json == "-" && o.csv == "-" {
		return usagef("--json and --csv both want stdout: give one of them a file (--csv=rows.csv)")
	}
	return nil
}

// opsResult is what an operator command found or did.
type opsResult struct {
	value any // what --json prints
	text  func(io.Writer) error
	csv   func(io.Writer) error
	// failed, when set, makes the exit code 1 once the result is written:
	// the consumers over a --max-* bound, the replays that failed.
	failed error
}

// finish ends an operator command whose work returned err. An interrupted
// command prints nothing and exits 130; one that failed prints nothing
// and returns err (exit 1, or 2 for a usage error), so that what --json
// writes is always the whole result. Otherwise it writes the result.
func (o *opsOutput) finish(cmd *cobra.Command, err error, res opsResult) error {
	if errors.Is(context.Cause(cmd.Context()), errInterrupted) {
		return &exitError{code: exitInterrupted, err: errInterrupted, quiet: true}
	}
	if err != nil {
		return err
	}
	out := &writes{stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr()}
	out.write(o.json, "json", func(w io.Writer) error { return writeJSON(w, res.value) })
	out.write(o.csv, "csv", res.csv)
	if o.json != "-" && o.csv != "-" && res.text != nil {
		if err := res.text(out.stdout); err != nil {
			out.errs = append(out.errs, fmt.Errorf("print: %w", err))
		}
	}
	if len(out.errs) > 0 {
		return &exitError{code: exitFailed, err: errors.Join(out.errs...)}
	}
	if res.failed != nil {
		return &exitError{code: exitFailed, err: res.failed}
	}
	return nil
}

// writeJSON writes v as indented JSON: exact, with the characters a
// terminal would act on written as JSON escapes (termtext.JSON).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(termtext.JSONWriter(w))
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// bound is an operator flag such as --max-lag N: when given, a listed
// value above N makes the command exit 1 once it has printed the listing.
type bound struct {
	flag, what string
	n          int64
	set        bool
	keys       []string // the things over the bound
	lines      []string // a line for each, for the error
}

// newBound registers --flag on f; what names the value ("lag").
func newBound(f *pflag.FlagSet, flag, what, help string) *bound {
	b := &bound{flag: flag, what: what}
	f.Int64Var(&b.n, flag, 0, help)
	return b
}

// parse notes whether the flag was given and checks it against [0, hi].
func (b *bound) parse(f *pflag.FlagSet, hi int64) error {
	b.set = f.Changed(b.flag)
	if b.set && (b.n < 0 || b.n > hi) {
		return usagef("--%s %d: want 0 to %d", b.flag, b.n, hi)
	}
	return nil
}

// check records key (a consumer, a projection, a slot) as over the bound
// when the flag was given and over is true. label names it in the error
// ("orders v2" for a version of projection "orders"); shown is the value
// as the error gives it ("> 10000" for a lag counted up to a limit).
func (b *bound) check(key, label string, over bool, shown string) {
	if b.set && over {
		b.keys = append(b.keys, key)
		b.lines = append(b.lines, fmt.Sprintf("%s: %s %s, over --%s %d", label, b.what, shown, b.flag, b.n))
	}
}

// overBounds is the error of a listing of n things (noun: "consumers")
// when some are over their bounds: a line for each excess (errorText
// escapes the names); nil when none is over.
func overBounds(n int, noun string, bounds ...*bound) error {
	var lines []error
	over := map[string]bool{}
	for _, b := range bounds {
		for i, l := range b.lines {
			over[b.keys[i]] = true
			lines = append(lines, errors.New("  "+l))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	verb := "are"
	if len(over) == 1 {
		verb = "is"
	}
	head := fmt.Errorf("%d of the %d %s listed %s over a bound", len(over), n, noun, verb)
	return errors.Join(append([]error{head}, lines...)...)
}

// labFlagError makes the error of an unknown flag clearer when it is one
// of the lab's given to an operator command: which commands take it, and
// the operator's own flag for a --check on a listing of consumers.
func labFlagError(cmd *cobra.Command, err error) error {
	if !isOperator(cmd) {
		return usage(err)
	}
	msg := err.Error()
	var name, given string
	if long, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		name, given = long, "--"+long
	} else if short, ok := strings.CutPrefix(msg, "unknown shorthand flag: '"); ok && len(short) > 0 {
		name, given = labShorthand(cmd.Root(), short[:1]), "-"+short[:1]
	}
	if name == "" || !isLabFlag(cmd.Root(), name) {
		return usage(err)
	}
	hint := ""
	if name == "check" {
		var alerts []string
		for _, f := range []string{"max-lag", "max-retained", "max-parked"} {
			if cmd.Flags().Lookup(f) != nil {
				alerts = append(alerts, "--"+f)
			}
		}
		if len(alerts) > 0 {
			hint = "; for an alert use " + strings.Join(alerts, " or ")
		}
	}
	return usagef("%s is a flag of the lab commands (bench, loadtest, deliver-bench, matrix, soak), not of the operator command %q%s",
		given, cmd.CommandPath(), hint)
}

// isOperator says whether cmd is one of the operator commands or below one.
func isOperator(cmd *cobra.Command) bool {
	for c := cmd; c != nil && c.HasParent(); c = c.Parent() {
		if !c.Parent().HasParent() {
			return operatorCommands[c.Name()]
		}
	}
	return false
}

// labCommands are the lab's commands under root.
func labCommands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range root.Commands() {
		if c.GroupID == groupLab {
			out = append(out, c)
		}
	}
	return out
}

func isLabFlag(root *cobra.Command, name string) bool {
	for _, c := range labCommands(root) {
		if c.Flags().Lookup(name) != nil {
			return true
		}
	}
	return false
}

// labShorthand is the long name of a lab flag with shorthand s, or "".
func labShorthand(root *cobra.Command, s string) string {
	for _, c := range labCommands(root) {
		if f := c.Flags().ShorthandLookup(s); f != nil {
			return f.Name
		}
	}
	return ""
}
