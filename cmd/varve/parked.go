package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/lab"
)

// openStore opens a store URL; tests replace it.
var openStore = lab.Open

// parkedFlags select a subscription's parked events.
type parkedFlags struct {
	store, subscription string
	streams             []string
	positions           []string
}

func (p *parkedFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.store, "store", "", "store URL (required)")
	f.StringVar(&p.subscription, "subscription", "", "subscription name (required)")
	f.StringSliceVar(&p.streams, "stream", nil, "only the parked events of these streams")
	f.StringSliceVar(&p.positions, "position", nil, "only the parked events at these positions")
	_ = cmd.MarkFlagRequired("store")
	_ = cmd.MarkFlagRequired("subscription")
}

func (p *parkedFlags) open(ctx context.Context) (*varve.Store, *delivery.Parked, func(delivery.ParkedEvent) bool, error) {
	var positions []varve.Position
	for _, s := range p.positions {
		pos, err := varve.ParsePosition(s)
		if err != nil {
			return nil, nil, nil, err
		}
		positions = append(positions, pos)
	}
	match := func(pe delivery.ParkedEvent) bool {
		return (len(p.streams) == 0 || slices.Contains(p.streams, pe.Stream)) &&
			(len(positions) == 0 || slices.Contains(positions, pe.Position))
	}
	store, err := openStore(ctx, p.store)
	if err != nil {
		return nil, nil, nil, err
	}
	return store, delivery.NewParked(store, p.subscription), match, nil
}

func parkedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "parked",
		Short: "List, replay or skip the events a subscription's dispatcher parked",
		Long: `A dispatcher parks an event that its sink rejects or that fails until its retries run
out; in per-stream order the later events of that stream are parked behind it. Parked
events are kept in the store, in the stream "$parked-<subscription>". Replaying
delivers them again, each stream in order, with their original idempotency keys;
skipping drops them. Either way a running dispatcher then delivers the stream again.`,
	}
	cmd.AddCommand(parkedListCmd(), parkedReplayCmd(), parkedSkipCmd())
	return cmd
}

func parkedListCmd() *cobra.Command {
	var pf parkedFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List parked events, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, parked, match, err := pf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer store.Close()
			list, err := parked.List(cmd.Context())
			if err != nil {
				return err
			}
			list = slices.DeleteFunc(list, func(pe delivery.ParkedEvent) bool { return !match(pe) })
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			return printParked(cmd.OutOrStdout(), list)
		},
	}
	pf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printParked(w io.Writer, list []delivery.ParkedEvent) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POSITION\tSTREAM\tVERSION\tTYPE\tATTEMPTS\tPARKED AT\tREASON\tERROR")
	for _, pe := range list {
		fmt.Fprintf(tw, "%v\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", pe.Position, pe.Stream, pe.Version, pe.Type, pe.Attempts,
			pe.ParkedAt.Format(time.RFC3339), pe.Reason, pe.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d parked\n", len(list))
	return nil
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
		Short: "Deliver parked events again, each stream in order, to a webhook or a NATS subject",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var sink delivery.Sink
			switch {
			case hook != "" && natsURL == "":
				if secret == "" {
					secret = os.Getenv("VARVE_WEBHOOK_SECRET")
				}
				w, err := delivery.NewWebhook(delivery.WebhookConfig{URL: hook, Secret: []byte(secret), Timeout: timeout})
				if err != nil {
					return err
				}
				defer w.Close()
				sink = w
			case natsURL != "" && hook == "":
				nc, err := nats.Connect(natsURL)
				if err != nil {
					return fmt.Errorf("connect to NATS: %w", err)
				}
				defer nc.Close()
				js, err := jetstream.New(nc)
				if err != nil {
					return err
				}
				n, err := delivery.NewNATS(js, delivery.NATSConfig{Subject: natsSubject})
				if err != nil {
					return err
				}
				sink = delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
					ctx, cancel := context.WithTimeout(ctx, timeout)
					defer cancel()
					return n.Deliver(ctx, d)
				})
			default:
				return errors.New("give either --webhook (with --secret or VARVE_WEBHOOK_SECRET) or --nats with --subject")
			}
			store, parked, match, err := pf.open(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			res, err := parked.Replay(ctx, sink, match)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%d replayed, %d failed, %d held behind a failure\n", len(res.Delivered), len(res.Failed), res.Held)
			for _, f := range res.Failed {
				fmt.Fprintf(out, "failed: %s@%d (position %v): %v\n", f.Event.Stream, f.Event.Version, f.Event.Position, f.Err)
			}
			if err == nil && len(res.Failed) > 0 {
				err = fmt.Errorf("%d streams failed to replay; their events stay parked", len(res.Failed))
			}
			return err
		},
	}
	pf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&hook, "webhook", "", "webhook URL to deliver to")
	f.StringVar(&secret, "secret", "", "webhook signing secret (default $VARVE_WEBHOOK_SECRET)")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "timeout of one delivery")
	f.StringVar(&natsURL, "nats", "", "NATS URL to publish to")
	f.StringVar(&natsSubject, "subject", "", "NATS subject to publish to")
	return cmd
}

func parkedSkipCmd() *cobra.Command {
	var pf parkedFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "skip",
		Short: "Drop parked events without delivering them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !all && len(pf.streams) == 0 && len(pf.positions) == 0 {
				return errors.New("say which: --stream, --position or --all")
			}
			store, parked, match, err := pf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer store.Close()
			skipped, err := parked.Skip(cmd.Context(), match)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d skipped\n", len(skipped))
			return nil
		},
	}
	pf.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "skip every parked event of the subscription")
	return cmd
}
