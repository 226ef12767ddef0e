package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/server"
	"github.com/varve-go/varve/subscription"
)

func subsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "subs",
		Short: "List consumers with their checkpoints, lag and parked events; move a checkpoint",
		Long: `A store keeps no registry of consumers. What it keeps: checkpoints (named positions;
a subscription's checkpoint has its name) and the events a delivery subscription
parked (in the system stream "$parked-<name>"). subs shows both, merged by name.` + opsStoreHelp,
	}
	cmd.AddCommand(subsLsCmd(), subsResetCmd())
	return cmd
}

func subsLsCmd() *cobra.Command {
	var (
		store, prefix string
		lagLimit      int
		out           opsOutput
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List consumers: checkpoint, lag behind $all, state, parked events",
		Long: `ls lists the consumers whose names begin with --prefix: each checkpoint and each
delivery subscription with parked events, with its checkpoint, its lag (the events of
$all after the checkpoint that a subscription delivers, counted up to --lag-limit),
whether it is caught up, and how many of its events are parked. Whether a consumer is
running, the store does not know. For an alert, --max-lag N exits 1 (after the list,
naming each one) when a consumer lags more than N events, --max-parked N when one has
more than N events parked.` + opsStoreHelp,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.StringVar(&prefix, "prefix", "", "only consumers whose names begin with this")
	f.IntVar(&lagLimit, "lag-limit", server.DefaultLagLimit, "count at most this many events of each lag")
	maxLag := newBound(f, "max-lag", "lag", "exit 1 when a consumer lags more than this many events (counted exactly, whatever --lag-limit)")
	maxParked := newBound(f, "max-parked", "parked", "exit 1 when a consumer has more than this many events parked")
	out.register(f, true)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		if err := countFlag("lag-limit", lagLimit, 0, maxEvents); err != nil {
			return err
		}
		if err := maxLag.parse(cmd.Flags(), maxEvents); err != nil {
			return err
		}
		if err := maxParked.parse(cmd.Flags(), maxEvents); err != nil {
			return err
		}
		t, err := resolveExisting(cmd, store)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		list := []delivery.Consumer{}
		var last varve.Position
		s, err := openStore(ctx, t.URL)
		if err == nil {
			if last, err = s.LastPosition(ctx); err == nil {
				list, err = delivery.Consumers(ctx, s, prefix, lagLimit)
				// A projection's origin and rebuild records are no consumers.
				list = slices.DeleteFunc(list, func(c delivery.Consumer) bool { return projection.Bookkeeping(c.Name) })
			}
			for _, c := range list {
				if err != nil {
					break
				}
				err = checkConsumer(ctx, s, c, lagLimit, maxLag, maxParked)
			}
			s.Close()
		}
		return out.finish(cmd, err, opsResult{
			value:  list,
			text:   func(w io.Writer) error { return printConsumers(w, list, last, lagLimit) },
			csv:    func(w io.Writer) error { return writeConsumersCSV(w, list) },
			failed: overBounds(len(list), "consumers", maxLag, maxParked),
		})
	}
	return cmd
}

// checkConsumer holds c against --max-lag and --max-parked. A lag cut at
// the --lag-limit of the listing at or below the bound is counted again,
// up to the bound.
func checkConsumer(ctx context.Context, s *varve.Store, c delivery.Consumer, limit int, maxLag, maxParked *bound) error {
	maxParked.check(c.Name, c.Name, int64(c.Parked) > maxParked.n, strconv.Itoa(c.Parked))
	if !maxLag.set || c.Checkpoint == nil {
		return nil
	}
	over, shown := int64(c.Lag) > maxLag.n, lagText(c, limit)
	if !over && c.LagMore {
		var err error
		if over, err = lagOver(ctx, s, c.Name, *c.Checkpoint, maxLag.n); err != nil {
			return err
		}
		shown = "> " + strconv.FormatInt(maxLag.n, 10)
	}
	maxLag.check(c.Name, c.Name, over, shown)
	return nil
}

// lagOver says whether more than n events that subscription name reads
// (by the filter it recorded) follow pos.
func lagOver(ctx context.Context, s *varve.Store, name string, pos varve.Position, n int64) (bool, error) {
	d, _, err := subscription.Described(ctx, s, name)
	if err != nil {
		return false, err
	}
	_, more, err := subscription.Lag(ctx, s, pos, d, int(min(n, math.MaxInt32)))
	return more, err
}

func lagText(c delivery.Consumer, limit int) string {
	switch {
	case c.Checkpoint == nil:
		return "-"
	case c.LagMore:
		return "> " + strconv.Itoa(limit)
	}
	return strconv.Itoa(c.Lag)
}

func consumerState(c delivery.Consumer) string {
	switch {
	case c.Checkpoint == nil:
		return "no checkpoint"
	case c.CaughtUp:
		return "caught up"
	}
	return "behind"
}

// runs says whether a consumer runs, by its heartbeats.
func runs(c delivery.Consumer) string {
	switch {
	case c.Running == nil:
		return "unknown"
	case *c.Running == 1:
		return "running"
	case *c.Running > 1:
		return fmt.Sprintf("running x%d", *c.Running)
	case c.LastSeen != nil:
		return "stopped since " + c.LastSeen.Local().Format(time.DateTime)
	case c.Seen:
		return "stopped"
	}
	return "never seen"
}

func printConsumers(w io.Writer, list []delivery.Consumer, last varve.Position, limit int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCHECKPOINT\tLAG\tSTATE\tRUNS\tPARKED")
	for _, c := range list {
		cp := "none"
		if c.Checkpoint != nil {
			cp = c.Checkpoint.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", termtext.Escape(c.Name), cp, lagText(c, limit), consumerState(c), runs(c), c.Parked)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d consumers; $all ends at %s\n", len(list), last)
	return err
}

func writeConsumersCSV(w io.Writer, list []delivery.Consumer) error {
	cw := newCSV(w)
	cw.row("name", "checkpoint", "lag", "lag_more", "caught_up", "parked", "running", "seen", "last_seen")
	for _, c := range list {
		cp, running, last := "", "", ""
		if c.Checkpoint != nil {
			cp = c.Checkpoint.String()
		}
		if c.Running != nil {
			running = strconv.Itoa(*c.Running)
		}
		if c.LastSeen != nil {
			last = c.LastSeen.UTC().Format(time.RFC3339)
		}
		cw.row(c.Name, cp, strconv.Itoa(c.Lag), strconv.FormatBool(c.LagMore), strconv.FormatBool(c.CaughtUp), strconv.Itoa(c.Parked), running, strconv.FormatBool(c.Seen), last)
	}
	return cw.flush()
}

func subsResetCmd() *cobra.Command {
	var (
		store, to string
		yes       bool
		out       opsOutput
	)
	cmd := &cobra.Command{
		Use:   "reset NAME --to POS",
		Short: "Move a consumer's checkpoint (asks first)",
		Long: `reset saves a consumer's checkpoint at --to: "start" (the consumer gets every event
again), "end" (it skips everything written so far) or a position no later than the end
of $all. It asks for the consumer's name on stdin before it writes (a script may pipe
the name in) and writes nothing without it: the name as given, or as the question
quotes it (the way to type a name with blanks around it or control characters); an
interrupt ends the question at once; --yes skips it. Stop the consumer first: a running
one saves its own position over the new one. A consumer the store does not know is an
error (exit 1).` + opsStoreHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if to == "" {
				return usagef(`--to: say where: "start", "end" or a position`)
			}
			name := args[0]
			if err := varve.CheckName(name); err != nil {
				return usage(fmt.Errorf("subscription name: %w", err))
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var from, target *varve.Position
			reset := func() error {
				s, err := openStore(ctx, t.URL)
				if err != nil {
					return err
				}
				defer s.Close()
				c, _, err := delivery.InspectConsumer(ctx, s, name, -1)
				if err != nil {
					return err
				}
				from = c.Checkpoint
				last, err := s.LastPosition(ctx)
				if err != nil {
					return err
				}
				p, err := server.ResetTarget(to, last)
				if err != nil {
					return usage(fmt.Errorf("--to %w", err))
				}
				if !yes {
					fmt.Fprintf(cmd.ErrOrStderr(), "Move the checkpoint of %q on %s from %s to %s ($all ends at %s)?\nType the name to confirm: ",
						name, t.Label, positionText(from), p, last)
					ok, err := confirmName(ctx, name)
					if err != nil || !ok {
						return notConfirmed(err, "the checkpoint of %q stays at %s", name, positionText(from))
					}
				}
				if err := s.Checkpoints().Save(ctx, name, p); err != nil {
					return err
				}
				target = &p
				return nil
			}
			err = reset()
			return out.finish(cmd, err, opsResult{
				value: resetJSON{Subscription: name, From: from, To: target},
				text: func(w io.Writer) error {
					_, werr := fmt.Fprintf(w, "checkpoint of %s: %s -> %s\n", termtext.Escape(name), positionText(from), target)
					return werr
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.StringVar(&to, "to", "", `where to move the checkpoint: "start", "end" or a position ("12", "7:3")`)
	f.BoolVarP(&yes, "yes", "y", false, "do not ask")
	out.register(f, false)
	return cmd
}

// resetJSON is what subs reset --json prints: where the checkpoint was
// (null: none) and where it is now.
type resetJSON struct {
	Subscription string          `json:"subscription"`
	From         *varve.Position `json:"from"`
	To           *varve.Position `json:"to"`
}

func positionText(p *varve.Position) string {
	if p == nil {
		return "none"
	}
	return p.String()
}
