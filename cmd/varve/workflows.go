package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/workflow"
)

const workflowsHelp = `

A workflow instance is a stream named <workflow>-<instance id> (package workflow; "-" is
the category separator, which --category-separator sets): its inbox, state, outbox and
timers are its events. list and show read those streams; cancel ends an instance (its
runner takes no input after it, its pending timers are cancelled and its unsent commands
are not relayed); retry asks its runner to apply the input that failed again, which the
runner does when its subscription reads the workflow's own category (or runs with Run).`

func workflowsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "List and show workflow instances; cancel one, or retry its failed input",
		Long:  `workflows shows the instances of a durable workflow (package workflow) and acts on one.` + workflowsHelp + opsStoreHelp,
	}
	cmd.AddCommand(workflowsListCmd(), workflowsShowCmd(), workflowsCancelCmd(), workflowsRetryCmd())
	return cmd
}

// onStore runs f on the store of --store; an error resolving or opening
// it is f's.
func onStore(cmd *cobra.Command, store string, f func(context.Context, *varve.Store) error) error {
	t, err := resolveExisting(cmd, store)
	if err != nil {
		return err
	}
	s, err := openStore(cmd.Context(), t.URL)
	if err != nil {
		return err
	}
	defer s.Close()
	return f(cmd.Context(), s)
}

func workflowsListCmd() *cobra.Command {
	var (
		store, after string
		limit        int
		out          opsOutput
	)
	cmd := &cobra.Command{
		Use:   "list WORKFLOW",
		Short: "List a workflow's instances: state, pending timers, unsent commands, last error",
		Long:  `list prints one page of the instances of the workflow named WORKFLOW (--after for the next).` + workflowsHelp + opsStoreHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if limit < 1 || limit > 1000 {
				return usagef("--limit %d: want 1 to 1000", limit)
			}
			var page workflow.Page
			err := onStore(cmd, store, func(ctx context.Context, s *varve.Store) (err error) {
				page, err = workflow.List(ctx, s, args[0], after, limit)
				return err
			})
			if page.Instances == nil {
				page.Instances = []workflow.Status{}
			}
			return out.finish(cmd, err, opsResult{
				value: page,
				text:  func(w io.Writer) error { return printWorkflows(w, page) },
				csv:   func(w io.Writer) error { return writeWorkflowsCSV(w, page.Instances) },
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.StringVar(&after, "after", "", "list the instances whose streams sort after this one (the next page)")
	f.IntVar(&limit, "limit", 50, "instances in the page (1 to 1000)")
	out.register(f, true)
	return cmd
}

func printWorkflows(w io.Writer, page workflow.Page) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tVERSION\tSTATE\tINPUTS\tPENDING TIMERS\tNEXT DUE\tUNSENT\tLAST ERROR")
	for _, st := range page.Instances {
		state := termtext.Escape(st.LastEvent)
		if st.Cancelled {
			state = "cancelled"
		}
		due := "-"
		if len(st.Pending) > 0 {
			due = st.Pending[0].Due.Format(time.RFC3339)
		}
		last := "-"
		if st.LastError != nil {
			last = termtext.Escape(clip([]byte(st.LastError.Error), 60))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%d\t%s\n", termtext.Escape(st.Stream), st.Version, state, st.Inputs, len(st.Pending), due, len(st.Unsent), last)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d instances", len(page.Instances))
	if err == nil && page.Next != "" {
		_, err = fmt.Fprintf(w, "; the next page: --after %s", strconv.Quote(page.Next))
	}
	if err == nil {
		_, err = fmt.Fprintln(w)
	}
	return err
}

func writeWorkflowsCSV(w io.Writer, sts []workflow.Status) error {
	cw := newCSV(w)
	cw.row("stream", "version", "last_event", "cancelled", "inputs", "pending_timers", "next_due", "unsent", "last_error")
	for _, st := range sts {
		due, last := "", ""
		if len(st.Pending) > 0 {
			due = st.Pending[0].Due.Format(time.RFC3339Nano)
		}
		if st.LastError != nil {
			last = st.LastError.Error
		}
		cw.row(st.Stream, strconv.FormatUint(st.Version, 10), st.LastEvent, strconv.FormatBool(st.Cancelled), strconv.Itoa(st.Inputs),
			strconv.Itoa(len(st.Pending)), due, strconv.Itoa(len(st.Unsent)), last)
	}
	return cw.flush()
}

func workflowsShowCmd() *cobra.Command {
	var (
		store string
		out   opsOutput
	)
	cmd := &cobra.Command{
		Use:   "show STREAM",
		Short: "Show one workflow instance: its timers, unsent commands and last error",
		Long:  `show prints what the instance stream STREAM says of its instance.` + workflowsHelp + opsStoreHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			var st workflow.Status
			err := onStore(cmd, store, func(ctx context.Context, s *varve.Store) (err error) {
				st, err = workflow.Inspect(ctx, s, args[0])
				return err
			})
			return out.finish(cmd, err, opsResult{value: st, text: func(w io.Writer) error { return printWorkflow(w, st) }})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	out.register(f, false)
	return cmd
}

func printWorkflow(w io.Writer, st workflow.Status) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("instance   %s (version %d)\n", termtext.Escape(st.Stream), st.Version)
	switch {
	case st.Cancelled:
		p("state      cancelled: %s\n", termtext.Escape(st.Reason))
	case st.LastEvent != "":
		p("state      %s\n", termtext.Escape(st.LastEvent))
	default:
		p("state      (no state event yet)\n")
	}
	if st.LastInput.IsZero() {
		p("inputs     %d\n", st.Inputs)
	} else {
		p("inputs     %d, the last at %s\n", st.Inputs, st.LastInput.Format(time.RFC3339))
	}
	p("timers     %d pending\n", len(st.Pending))
	for _, t := range st.Pending {
		p("  %s due %s\n", termtext.Escape(t.ID), t.Due.Format(time.RFC3339Nano))
	}
	p("unsent     %d commands\n", len(st.Unsent))
	for _, c := range st.Unsent {
		p("  %s %s\n", c.ID, termtext.Escape(c.Type))
	}
	if st.LastError == nil {
		_, err := fmt.Fprintln(w, "last error -")
		return err
	}
	e := st.LastError
	_, err := fmt.Fprintf(w, "last error at %s, input %s (%s): %s\n", e.At.Format(time.RFC3339), e.Input, termtext.Escape(e.Type), termtext.Escape(e.Error))
	return err
}

func workflowsCancelCmd() *cobra.Command {
	var (
		store, reason string
		yes           bool
		out           opsOutput
	)
	cmd := &cobra.Command{
		Use:   "cancel STREAM",
		Short: "Cancel a workflow instance: no more inputs, its timers cancelled, its commands not relayed",
		Long:  `cancel ends the instance of the stream STREAM, asking first unless --yes.` + workflowsHelp + opsStoreHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			stream := args[0]
			s, err := openStore(ctx, t.URL)
			if err != nil {
				return err
			}
			defer s.Close()
			if !yes {
				fmt.Fprintf(cmd.ErrOrStderr(), "Cancel the workflow instance %s on %s?\nType its stream to confirm: ", strconv.Quote(stream), t.Label)
				ok, err := confirmName(ctx, stream)
				if err != nil || !ok {
					return notConfirmed(err, "%s goes on", strconv.Quote(stream))
				}
			}
			err = workflow.Cancel(ctx, s, stream, reason)
			return out.finish(cmd, err, opsResult{
				value: map[string]string{"stream": stream, "action": "cancelled", "reason": reason},
				text: func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "cancelled %s\n", termtext.Escape(stream))
					return err
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.StringVar(&reason, "reason", "", "why, recorded with the cancel")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask")
	out.register(f, false)
	return cmd
}

func workflowsRetryCmd() *cobra.Command {
	var (
		store string
		out   opsOutput
	)
	cmd := &cobra.Command{
		Use:   "retry STREAM",
		Short: "Ask a workflow instance's runner to apply its failed input again",
		Long:  `retry records a retry request for the last failed input of the instance STREAM.` + workflowsHelp + opsStoreHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			var f workflow.Failure
			err := onStore(cmd, store, func(ctx context.Context, s *varve.Store) (err error) {
				f, err = workflow.Retry(ctx, s, args[0])
				return err
			})
			return out.finish(cmd, err, opsResult{
				value: map[string]any{"stream": args[0], "action": "retry requested", "failure": f},
				text: func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "asked the runner of %s to apply input %s (%s) again\n", termtext.Escape(args[0]), f.Input, termtext.Escape(f.Type))
					return err
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	out.register(f, false)
	return cmd
}
