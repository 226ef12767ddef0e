package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
)

// outputs are the report flags: --json[=FILE], --csv[=FILE], --html FILE
// and --check.
type outputs struct {
	json, csv, html string
	checks          []string
	parsed          []lab.Check
}

// register adds the flags; withHTML says whether the command has an HTML
// report.
func (o *outputs) register(f *pflag.FlagSet, withHTML bool) {
	f.StringVar(&o.json, "json", "", "print the JSON envelope instead of the table; --json=FILE writes it to FILE")
	f.Lookup("json").NoOptDefVal = "-"
	f.StringVar(&o.csv, "csv", "", "print the result rows as CSV instead of the table; --csv=FILE writes them to FILE")
	f.Lookup("csv").NoOptDefVal = "-"
	if withHTML {
		f.StringVar(&o.html, "html", "", "also write a self-contained HTML report (charts, no network) to this file")
	}
	f.StringArrayVar(&o.checks, "check", nil, "fail the run (exit 1) unless every row meets this, such as 'p99<5ms', 'errors==0', 'ratio>=0.8'; repeatable")
}

// validate checks the flags before the run.
func (o *outputs) validate() error {
	if o.json == "-" && o.csv == "-" {
		return usagef("--json and --csv both want stdout: give one of them a file (--csv=rows.csv)")
	}
	if o.html == "-" {
		return usagef("--html wants a file name")
	}
	checks, err := lab.ParseChecks(o.checks)
	if err != nil {
		return usage(fmt.Errorf("--check: %w", err))
	}
	o.parsed = checks
	return nil
}

// report is what a command hands to finish.
type report struct {
	env *lab.Envelope
	// rows are what the checks look at; nil means env.Rows().
	rows []lab.Row
	text func(io.Writer) error
	html func(io.Writer) error
	csv  func(io.Writer) error // nil: the rows as CSV
	// failures beyond errors and checks that make the exit code 1 (soak's
	// memory verdict).
	failures []string
}

// finish completes a run: it evaluates the checks, writes the reports and
// returns the error that carries the exit code. Partial results of an
// interrupted run are written like whole ones.
func finish(cmd *cobra.Command, o *outputs, r report) error {
	ctx := cmd.Context()
	env := r.env
	env.Interrupted = errors.Is(context.Cause(ctx), errInterrupted)
	env.Finish()
	rows := r.rows
	if rows == nil {
		rows = env.Rows()
	}
	if len(o.parsed) > 0 {
		env.Checks = lab.Evaluate(o.parsed, rows)
	}
	var problems []string
	for _, row := range rows {
		if row.Errors > 0 {
			msg := fmt.Sprintf("%s: %d errors", row.Label(), row.Errors)
			if row.Error != "" {
				msg += ": " + row.Error
			}
			problems = append(problems, msg)
		}
	}
	problems = append(problems, env.Errors...)
	problems = append(problems, r.failures...)
	failedChecks := 0
	for _, c := range env.Checks {
		if !c.Passed {
			failedChecks++
		}
	}
	switch {
	case env.Interrupted:
		env.ExitCode = exitInterrupted
	case len(problems) > 0 || failedChecks > 0:
		env.ExitCode = exitFailed
	default:
		env.ExitCode = exitOK
	}

	out := &writes{stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr()}
	csvFn := r.csv
	if csvFn == nil {
		csvFn = func(w io.Writer) error { return env.WriteRowsCSV(w, rows) }
	}
	out.write(o.html, "html report", r.html)
	out.write(o.json, "json", env.WriteJSON)
	out.write(o.csv, "csv", csvFn)
	if o.json != "-" && o.csv != "-" && r.text != nil {
		if err := r.text(out.stdout); err != nil {
			out.errs = append(out.errs, fmt.Errorf("print: %w", err))
		}
	}
	for _, c := range env.Checks {
		if c.Passed {
			fmt.Fprintf(out.stderr, "check %s: ok\n", c.Check)
			continue
		}
		fmt.Fprintf(out.stderr, "check %s: FAILED\n", c.Check)
		for _, f := range c.Failures {
			fmt.Fprintf(out.stderr, "  %s\n", termtext.Escape(f))
		}
	}
	if len(out.errs) > 0 {
		return &exitError{code: exitFailed, err: errors.Join(out.errs...)}
	}
	switch env.ExitCode {
	case exitInterrupted:
		return &exitError{code: exitInterrupted, err: errInterrupted, quiet: true}
	case exitFailed:
		var parts []string
		if len(problems) > 0 {
			first := problems[0]
			if len(problems) > 1 {
				first += fmt.Sprintf(" (and %d more)", len(problems)-1)
			}
			parts = append(parts, first)
		}
		if failedChecks > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d checks failed", failedChecks, len(env.Checks)))
		}
		return &exitError{code: exitFailed, err: errors.New(lab.Scrub(strings.Join(parts, "; ")))}
	}
	return nil
}

// writeFile writes a report file through write, closing it and reporting
// the first error.
func writeFile(name string, write func(io.Writer) error) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return write(f)
}

// csvWriter writes CSV records with every field escaped for a terminal
// (termtext.Escape): a report may be printed, and a field that spans lines
// or holds an escape sequence would reach the terminal as it is. --json
// has the exact text.
type csvWriter struct{ w *csv.Writer }

func newCSV(w io.Writer) csvWriter { return csvWriter{csv.NewWriter(w)} }

// row writes one record; an error shows in flush.
func (c csvWriter) row(fields ...string) {
	for i, f := range fields {
		fields[i] = termtext.Escape(f)
	}
	_ = c.w.Write(fields)
}

func (c csvWriter) flush() error {
	c.w.Flush()
	return c.w.Error()
}

// writes writes a command's outputs, each to stdout ("-") or to a file,
// and collects what failed.
type writes struct {
	stdout, stderr io.Writer
	errs           []error
}

// write writes fn's output, what it is, to dest; an empty dest or a nil fn
// writes nothing.
func (o *writes) write(dest, what string, fn func(io.Writer) error) {
	if dest == "" || fn == nil {
		return
	}
	if dest == "-" {
		if err := fn(o.stdout); err != nil {
			o.errs = append(o.errs, fmt.Errorf("%s: %w", what, err))
		}
		return
	}
	if err := writeFile(dest, fn); err != nil {
		o.errs = append(o.errs, fmt.Errorf("%s %s: %w", what, dest, err))
		return
	}
	fmt.Fprintf(o.stderr, "wrote %s\n", dest)
}
