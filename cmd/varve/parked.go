package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/natssink"
	"github.com/varve-go/varve/delivery/webhook"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/projection"
)

// openStore opens an existing store without creating anything; a store
// that is not there is an error that names varve init. Tests replace it.
var openStore = func(ctx context.Context, raw string) (*varve.Store, error) {
	s, err := open.Existing(ctx, raw, storeConfig(ctx))
	if errors.Is(err, open.ErrNotFound) {
		err = fmt.Errorf("%w%s", err, initHint)
	}
	return s, lab.ScrubErr(err)
}

// errUnknownSubscription: the store knows nothing of the subscription.
var errUnknownSubscription = errors.New("unknown subscription")

// parkedFlags select a subscription's parked events.
type parkedFlags struct {
	store, subscription string
	streams             []string
	positions           []string
	out                 opsOutput
	parsed              []varve.Position // positions, once parse has run
}

func (p *parkedFlags) register(cmd *cobra.Command, withCSV bool) {
	f := cmd.Flags()
	f.StringVar(&p.store, "store", "", "URL or SQLite file path of the store the subscription's dispatcher uses (default $"+storeEnv+"; nothing is created)")
	f.StringVar(&p.subscription, "subscription", "", "subscription name (required)")
	f.StringSliceVar(&p.streams, "stream", nil, "only the parked events of these streams")
	f.StringSliceVar(&p.positions, "position", nil, "only the parked events at these positions")
	p.out.register(f, withCSV)
}

// parsed checks the flags before anything opens.
func (p *parkedFlags) parse(cmd *cobra.Command) (func(delivery.ParkedEvent) bool, *lab.Target, error) {
	if err := p.out.validate(); err != nil {
		return nil, nil, err
	}
	var positions []varve.Position
	for _, s := range p.positions {
		pos, err := varve.ParsePosition(s)
		if err != nil {
			return nil, nil, usage(fmt.Errorf("--position %q: %w", s, err))
		}
		if pos.IsZero() {
			return nil, nil, usagef("--position %s: the start of the log is no event's position", s)
		}
		positions = append(positions, pos)
	}
	p.parsed = positions
	if p.subscription == "" {
		return nil, nil, usagef("--subscription: give the subscription's name")
	}
	t, err := resolveExisting(cmd, p.store)
	if err != nil {
		return nil, nil, err
	}
	match := func(pe delivery.ParkedEvent) bool {
		return (len(p.streams) == 0 || slices.Contains(p.streams, pe.Stream)) &&
			(len(positions) == 0 || slices.Contains(positions, pe.Position))
	}
	return match, t, nil
}

// open opens the store as it is and checks that it knows the
// subscription: a checkpoint of that name or a parked stream.
func (p *parkedFlags) open(ctx context.Context, t *lab.Target) (*varve.Store, *delivery.Parked, error) {
	store, err := openStore(ctx, t.URL)
	if err != nil {
		return nil, nil, err
	}
	parked := delivery.NewParked(store, p.subscription)
	known, err := knowsSubscription(ctx, store, p.subscription, parked.Stream())
	if err == nil && !known {
		err = fmt.Errorf("subscription %q: %w: %s has no checkpoint of that name and nothing was ever parked for it (stream %s)",
			p.subscription, errUnknownSubscription, t.Label, parked.Stream())
	}
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return store, parked, nil
}

func knowsSubscription(ctx context.Context, store *varve.Store, name, parkedStream string) (bool, error) {
	if _, err := store.StreamInfo(ctx, parkedStream); err == nil {
		return true, nil
	} else if !errors.Is(err, varve.ErrStreamNotFound) {
		return false, err
	}
	if cps := store.Checkpoints(); store.Capabilities().Checkpoints {
		_, ok, err := cps.Load(ctx, name)
		return ok, err
	}
	return false, nil
}

func parkedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "parked",
		Short: "List, replay or skip the events a dispatcher or a projection parked",
		Long: `A dispatcher parks an event that its sink rejects or that fails until its retries run
out; in per-stream order the later events of that stream are parked behind it. Parked
events are kept in the store, in the stream "$parked-<subscription>". Replaying
delivers them again, each stream in order, with their original idempotency keys;
skipping drops them. Either way a running dispatcher then delivers the stream again.
A projection parks under its version's checkpoint (projection-<name>-v<version>):
replaying its events, without --webhook or --nats, asks its runner to apply them
again through the projection's handler.`,
	}
	cmd.AddCommand(parkedListCmd(), parkedReplayCmd(), parkedSkipCmd())
	return cmd
}

func parkedListCmd() *cobra.Command {
	var pf parkedFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List parked events, oldest first",
		Long: `list prints the events a subscription's dispatcher parked and that are not
replayed or skipped, oldest first. It changes nothing in the store, and a
subscription the store does not know is an error (exit 1). For an alert on parked
events, see varve subs ls --max-parked.` + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			match, t, err := pf.parse(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			list := []delivery.ParkedEvent{}
			store, parked, err := pf.open(ctx, t)
			if err == nil {
				var all []delivery.ParkedEvent
				all, err = parked.List(ctx)
				store.Close()
				for _, pe := range all {
					if match(pe) {
						pe.Error = lab.Scrub(pe.Error)
						list = append(list, pe)
					}
				}
			}
			return pf.out.finish(cmd, err, opsResult{
				value: list,
				text:  func(w io.Writer) error { return printParked(w, list) },
				csv:   func(w io.Writer) error { return writeParkedCSV(w, list) },
			})
		},
	}
	pf.register(cmd, true)
	return cmd
}

func printParked(w io.Writer, list []delivery.ParkedEvent) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POSITION\tSTREAM\tVERSION\tTYPE\tATTEMPTS\tPARKED AT\tREASON\tERROR")
	for _, pe := range list {
		fmt.Fprintf(tw, "%v\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", pe.Position, termtext.Escape(pe.Stream), pe.Version, termtext.Escape(pe.Type), pe.Attempts,
			pe.ParkedAt.Format(time.RFC3339), termtext.Escape(pe.Reason), termtext.Escape(pe.Error))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d parked\n", len(list))
	return nil
}

func writeParkedCSV(w io.Writer, list []delivery.ParkedEvent) error {
	cw := newCSV(w)
	cw.row("position", "stream", "version", "type", "attempts", "parked_at", "reason", "error")
	for _, pe := range list {
		cw.row(pe.Position.String(), pe.Stream, strconv.FormatUint(uint64(pe.Version), 10), pe.Type,
			strconv.Itoa(pe.Attempts), pe.ParkedAt.Format(time.RFC3339Nano), pe.Reason, pe.Error)
	}
	return cw.flush()
}

func parkedReplayCmd() *cobra.Command {
	var (
		pf                   parkedFlags
		hook, secret         string
		timeout              time.Duration
		natsURL, natsSubject string
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Deliver parked events again, each stream in order, to a webhook or a NATS subject, or have a projection's runner apply them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := durationFlag("timeout", timeout, false); err != nil {
				return err
			}
			match, t, err := pf.parse(cmd)
			if err != nil {
				return err
			}
			lab.RegisterSecrets(hook)
			lab.RegisterSecrets(natsURL)
			var sink delivery.Sink
			switch {
			case hook != "" && natsURL == "":
				if secret == "" {
					secret = os.Getenv("VARVE_WEBHOOK_SECRET")
				}
				w, err := webhook.New(webhook.Config{URL: hook, Secret: []byte(secret), Timeout: timeout})
				if err != nil {
					return usage(fmt.Errorf("--webhook: %w", lab.ScrubErr(err)))
				}
				defer w.Close()
				sink = w
			case natsURL != "" && hook == "":
				nc, err := nats.Connect(natsURL)
				if err != nil {
					return fmt.Errorf("connect to NATS: %w", lab.ScrubErr(err))
				}
				defer nc.Close()
				js, err := jetstream.New(nc)
				if err != nil {
					return err
				}
				n, err := natssink.New(js, natssink.Config{Subject: natsSubject})
				if err != nil {
					return err
				}
				sink = delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
					ctx, cancel := context.WithTimeout(ctx, timeout)
					defer cancel()
					return n.Deliver(ctx, d)
				})
			case hook == "" && natsURL == "" && isProjection(pf.subscription):
				return replayProjection(cmd, &pf, t)
			default:
				return usagef("give either --webhook (with --secret or VARVE_WEBHOOK_SECRET) or --nats with --subject; a projection's parked events (--subscription projection-<name>-v<version>) replay through its runner, without either")
			}
			var res delivery.ReplayResult
			store, parked, err := pf.open(ctx, t)
			if err == nil {
				res, err = parked.Replay(ctx, sink, match)
				store.Close()
			}
			out := replayJSON{Replayed: res.Delivered, Failed: []replayFailure{}, Held: res.Held}
			if out.Replayed == nil {
				out.Replayed = []delivery.ParkedEvent{}
			}
			for _, f := range res.Failed {
				out.Failed = append(out.Failed, replayFailure{f.Event, lab.Scrub(f.Err.Error())})
			}
			var failed error
			if len(res.Failed) > 0 {
				failed = fmt.Errorf("%d streams failed to replay; their events stay parked; the first: %s", len(res.Failed), out.Failed[0].Error)
			}
			return pf.out.finish(cmd, err, opsResult{
				value: out,
				text: func(w io.Writer) error {
					fmt.Fprintf(w, "%d replayed, %d failed, %d held behind a failure\n", len(res.Delivered), len(res.Failed), res.Held)
					for _, f := range out.Failed {
						fmt.Fprintf(w, "failed: %s@%d (position %v): %s\n", termtext.Escape(f.Event.Stream), f.Event.Version, f.Event.Position, termtext.Escape(f.Error))
					}
					return nil
				},
				failed: failed,
			})
		},
	}
	pf.register(cmd, false)
	f := cmd.Flags()
	f.StringVar(&hook, "webhook", "", "webhook URL to deliver to")
	f.StringVar(&secret, "secret", "", "webhook signing secret (default $VARVE_WEBHOOK_SECRET)")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "timeout of one delivery")
	f.StringVar(&natsURL, "nats", "", "NATS URL to publish to")
	f.StringVar(&natsSubject, "subject", "", "NATS subject to publish to")
	return cmd
}

func isProjection(subscription string) bool {
	_, _, ok := projection.ParseCheckpointName(subscription)
	return ok
}

// replayProjection asks the runner of a projection to apply its parked
// events again through its handler (projection.ReplayParked).
func replayProjection(cmd *cobra.Command, pf *parkedFlags, t *lab.Target) error {
	ctx := cmd.Context()
	var req varve.Version
	store, _, err := pf.open(ctx, t)
	if err == nil {
		req, err = projection.ReplayParked(ctx, store, pf.subscription, pf.streams, pf.parsed)
		store.Close()
	}
	name, _, _ := projection.ParseCheckpointName(pf.subscription)
	out := projectionReplayJSON{Subscription: pf.subscription, Projection: name, Request: req}
	return pf.out.finish(cmd, err, opsResult{
		value: out,
		text: func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "replay of the events parked under %s requested (request %d): the projection's runner applies them through its handler within its control poll; varve projections status %s shows when it is done\n",
				termtext.Escape(pf.subscription), req, termtext.Escape(name))
			return err
		},
	})
}

// projectionReplayJSON is what parked replay --json prints for a
// projection: the request that its runner carries out.
type projectionReplayJSON struct {
	Subscription string        `json:"subscription"`
	Projection   string        `json:"projection"`
	Request      varve.Version `json:"request"`
}

// replayJSON is what parked replay --json prints: the events delivered,
// the first event of each stream that failed (its error), and how many
// events stay parked behind the failures.
type replayJSON struct {
	Replayed []delivery.ParkedEvent `json:"replayed"`
	Failed   []replayFailure        `json:"failed"`
	Held     int                    `json:"held"`
}

type replayFailure struct {
	Event delivery.ParkedEvent `json:"event"`
	Error string               `json:"error"`
}

func parkedSkipCmd() *cobra.Command {
	var pf parkedFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "skip",
		Short: "Drop parked events without delivering them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			match, t, err := pf.parse(cmd)
			if err != nil {
				return err
			}
			if !all && len(pf.streams) == 0 && len(pf.positions) == 0 {
				return usagef("say which: --stream, --position or --all")
			}
			ctx := cmd.Context()
			skipped := []delivery.ParkedEvent{}
			store, parked, err := pf.open(ctx, t)
			if err == nil {
				var got []delivery.ParkedEvent
				got, err = parked.Skip(ctx, match)
				skipped = append(skipped, got...)
				store.Close()
			}
			return pf.out.finish(cmd, err, opsResult{
				value: skipped,
				text: func(w io.Writer) error {
					_, werr := fmt.Fprintf(w, "%d skipped\n", len(skipped))
					return werr
				},
				csv: func(w io.Writer) error { return writeParkedCSV(w, skipped) },
			})
		},
	}
	pf.register(cmd, true)
	cmd.Flags().BoolVar(&all, "all", false, "skip every parked event of the subscription")
	return cmd
}
