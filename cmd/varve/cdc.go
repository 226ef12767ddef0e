package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/varve-go/varve/cdc/pgcdc"
	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
)

// cdcHelp ends the help of the cdc commands.
const cdcHelp = `

--url is the PostgreSQL database whose tables are captured (it must run with
wal_level=logical for a slot to be created). The slot keeps every change after what
its consumer acknowledged, so an abandoned slot keeps the server's WAL for ever: drop
what no consumer uses. Exit codes: 0 ok, 1 an error or a --check not met, 2 usage,
130 interrupted.`

func cdcCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cdc",
		Short: "Create, list and drop the logical replication slots and publications of change data capture",
		Long: `cdc manages what package cdc/pgcdc captures PostgreSQL tables through: a
publication (the tables) and a logical replication slot (pgoutput; where its consumer
is). A consumer (pgcdc.Start) creates both when they are missing; these commands
create them ahead, show each slot's lag, and drop them.` + cdcHelp,
	}
	cmd.AddCommand(cdcLsCmd(), cdcCreateCmd(), cdcDropCmd())
	return cmd
}

// cdcConnect checks --url and connects.
func cdcConnect(cmd *cobra.Command, url string) (*pgx.Conn, error) {
	if url == "" {
		return nil, usagef("--url: give the PostgreSQL database (see --help)")
	}
	if _, err := pgx.ParseConfig(url); err != nil {
		return nil, usage(fmt.Errorf("--url: %w", err))
	}
	conn, err := pgx.Connect(cmd.Context(), url)
	if err != nil {
		return nil, fmt.Errorf("cdc: connect to %s: %w", lab.Redact(url), err)
	}
	return conn, nil
}

func cdcLsCmd() *cobra.Command {
	var (
		url string
		out outputs
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the database's logical slots: active, confirmed LSN, lag and retained WAL in bytes",
		Long: `ls lists the logical replication slots of the database: whether a consumer streams
from it, its confirmed flush LSN, its lag (WAL written since the consumer's last
acknowledgement) and the WAL the server retains for it, in bytes. The rows that
--check sees are the slots, count being the retained bytes: --check 'count<1000000000'
fails when a slot holds a gigabyte or more of WAL.` + cdcHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			conn, err := cdcConnect(cmd, url)
			if err != nil {
				return err
			}
			defer conn.Close(cmd.Context())
			env := lab.NewEnvelope("cdc ls")
			env.Config = map[string]any{"url": lab.Redact(url)}
			slots, err := pgcdc.Slots(cmd.Context(), conn)
			runError(cmd.Context(), env, err)
			if slots == nil {
				slots = []pgcdc.SlotInfo{}
			}
			env.Results = slots
			rows := []lab.Row{}
			for _, s := range slots {
				rows = append(rows, lab.Row{Store: lab.Redact(url), Name: s.Name, Unit: "bytes retained", Count: s.RetainedBytes, Stopped: "budget",
					Detail: map[string]any{"active": s.Active, "lag_bytes": s.LagBytes, "confirmed_flush_lsn": s.ConfirmedFlushLSN.String()}})
			}
			return finish(cmd, &out, report{
				env:  env,
				rows: rows,
				text: func(w io.Writer) error {
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "SLOT\tPLUGIN\tACTIVE\tCONFIRMED\tLAG BYTES\tRETAINED BYTES\tWAL STATUS")
					for _, s := range slots {
						fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%d\t%s\n", termtext.Escape(s.Name), termtext.Escape(s.Plugin), s.Active, s.ConfirmedFlushLSN, s.LagBytes, s.RetainedBytes, termtext.Escape(s.WALStatus))
					}
					return tw.Flush()
				},
			})
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the PostgreSQL database (required)")
	out.register(cmd.Flags(), false)
	return cmd
}

func cdcCreateCmd() *cobra.Command {
	var (
		url, slot, pub string
		tables         []string
		out            outputs
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create the publication and the slot unless they exist",
		Long: `create makes the publication --publication (of the --table tables, or of all
tables without one) and the logical replication slot --slot (pgoutput) unless they
exist; existing ones are kept as they are. It checks wal_level first.` + cdcHelp,
		Example: `  varve cdc create --url postgres://postgres@127.0.0.1/shop --slot shop_cdc --publication shop_cdc --table public.orders`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if slot == "" || pub == "" {
				return usagef("--slot and --publication are required")
			}
			conn, err := cdcConnect(cmd, url)
			if err != nil {
				return err
			}
			defer conn.Close(cmd.Context())
			ctx := cmd.Context()
			env := lab.NewEnvelope("cdc create")
			env.Config = map[string]any{"url": lab.Redact(url), "slot": slot, "publication": pub, "tables": tables}
			var pubCreated, slotCreated bool
			err = pgcdc.CheckWALLevel(ctx, conn)
			if err == nil {
				pubCreated, err = pgcdc.EnsurePublication(ctx, conn, pub, tables)
			}
			if err == nil {
				slotCreated, err = pgcdc.EnsureSlot(ctx, conn, slot)
			}
			runError(ctx, env, err)
			env.Results = map[string]any{"publication_created": pubCreated, "slot_created": slotCreated}
			return finish(cmd, &out, report{
				env:  env,
				rows: []lab.Row{},
				text: func(w io.Writer) error {
					if err != nil {
						return nil
					}
					fmt.Fprintf(w, "publication %s: %s\nslot %s: %s\n", pub, createdOrKept(pubCreated), slot, createdOrKept(slotCreated))
					return nil
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "the PostgreSQL database (required)")
	f.StringVar(&slot, "slot", "", "the replication slot (required)")
	f.StringVar(&pub, "publication", "", "the publication (required)")
	f.StringArrayVar(&tables, "table", nil, "a table of a new publication (schema.table); repeatable; none: all tables")
	out.register(f, false)
	return cmd
}

func createdOrKept(created bool) string {
	if created {
		return "created"
	}
	return "exists, kept"
}

func cdcDropCmd() *cobra.Command {
	var (
		url, slot, pub string
		out            outputs
	)
	cmd := &cobra.Command{
		Use:   "drop",
		Short: "Drop the slot and the publication if they exist",
		Long: `drop removes the slot --slot and, with --publication, the publication, if they
exist. A slot a consumer streams from cannot be dropped: drop waits up to 10s for a
consumer that is closing, then fails.` + cdcHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if slot == "" && pub == "" {
				return usagef("give --slot, --publication or both")
			}
			conn, err := cdcConnect(cmd, url)
			if err != nil {
				return err
			}
			defer conn.Close(cmd.Context())
			env := lab.NewEnvelope("cdc drop")
			env.Config = map[string]any{"url": lab.Redact(url), "slot": slot, "publication": pub}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			if slot != "" {
				err = pgcdc.DropSlot(ctx, conn, slot)
			}
			if err == nil && pub != "" {
				err = pgcdc.DropPublication(ctx, conn, pub)
			}
			runError(cmd.Context(), env, err)
			env.Results = map[string]any{"slot": slot, "publication": pub}
			return finish(cmd, &out, report{env: env, rows: []lab.Row{}, text: func(io.Writer) error { return nil }})
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "the PostgreSQL database (required)")
	f.StringVar(&slot, "slot", "", "the replication slot to drop")
	f.StringVar(&pub, "publication", "", "the publication to drop")
	out.register(f, false)
	return cmd
}
