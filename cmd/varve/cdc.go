package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
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
what no consumer uses. --json prints plain JSON of what the command lists or did
(docs/lab.md has the shapes). Exit codes: 0 ok, 1 an error (nothing printed) or a
--max-* bound exceeded, 2 usage, 130 interrupted.`

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
		out opsOutput
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the database's logical slots: active, confirmed LSN, lag and retained WAL in bytes",
		Long: `ls lists the logical replication slots of the database: whether a consumer streams
from it, its confirmed flush LSN, its lag (WAL written since the consumer's last
acknowledgement) and the WAL the server retains for it, in bytes. For an alert,
--max-lag N exits 1 (after the list, naming each one) when a slot lags more than N
bytes, --max-retained N when the server retains more than N bytes of WAL for one:
--max-retained 1000000000 fails when a slot holds more than a gigabyte.` + cdcHelp,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "the PostgreSQL database (required)")
	maxLag := newBound(f, "max-lag", "lag", "exit 1 when a slot lags more than this many bytes of WAL")
	maxRetained := newBound(f, "max-retained", "retained WAL", "exit 1 when the server retains more than this many bytes of WAL for a slot")
	out.register(f, true)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		if err := maxLag.parse(cmd.Flags(), math.MaxInt64); err != nil {
			return err
		}
		if err := maxRetained.parse(cmd.Flags(), math.MaxInt64); err != nil {
			return err
		}
		conn, err := cdcConnect(cmd, url)
		if err != nil {
			return err
		}
		defer conn.Close(cmd.Context())
		slots, err := pgcdc.Slots(cmd.Context(), conn)
		list := []slotJSON{}
		for _, s := range slots {
			list = append(list, slotOf(s))
			maxLag.check(s.Name, s.Name, s.LagBytes > maxLag.n, strconv.FormatInt(s.LagBytes, 10)+" bytes")
			maxRetained.check(s.Name, s.Name, s.RetainedBytes > maxRetained.n, strconv.FormatInt(s.RetainedBytes, 10)+" bytes")
		}
		return out.finish(cmd, err, opsResult{
			value: list,
			text: func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "SLOT\tPLUGIN\tACTIVE\tCONFIRMED\tLAG BYTES\tRETAINED BYTES\tWAL STATUS")
				for _, s := range slots {
					fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%d\t%s\n", termtext.Escape(s.Name), termtext.Escape(s.Plugin), s.Active, s.ConfirmedFlushLSN, s.LagBytes, s.RetainedBytes, termtext.Escape(s.WALStatus))
				}
				return tw.Flush()
			},
			csv: func(w io.Writer) error {
				cw := newCSV(w)
				cw.row("name", "plugin", "database", "active", "restart_lsn", "confirmed_flush_lsn", "current_lsn", "lag_bytes", "retained_bytes", "wal_status")
				for _, s := range list {
					cw.row(s.Name, s.Plugin, s.Database, strconv.FormatBool(s.Active), s.RestartLSN, s.ConfirmedFlushLSN, s.CurrentLSN,
						strconv.FormatInt(s.LagBytes, 10), strconv.FormatInt(s.RetainedBytes, 10), s.WALStatus)
				}
				return cw.flush()
			},
			failed: overBounds(len(slots), "slots", maxLag, maxRetained),
		})
	}
	return cmd
}

// slotJSON is a slot as cdc ls --json prints it; LSNs in PostgreSQL's
// text form ("0/16B3748").
type slotJSON struct {
	Name              string `json:"name"`
	Plugin            string `json:"plugin"`
	Database          string `json:"database"`
	Active            bool   `json:"active"`
	RestartLSN        string `json:"restart_lsn"`
	ConfirmedFlushLSN string `json:"confirmed_flush_lsn"`
	CurrentLSN        string `json:"current_lsn"`
	LagBytes          int64  `json:"lag_bytes"`
	RetainedBytes     int64  `json:"retained_bytes"`
	WALStatus         string `json:"wal_status"`
}

func slotOf(s pgcdc.SlotInfo) slotJSON {
	return slotJSON{Name: s.Name, Plugin: s.Plugin, Database: s.Database, Active: s.Active, RestartLSN: s.RestartLSN.String(),
		ConfirmedFlushLSN: s.ConfirmedFlushLSN.String(), CurrentLSN: s.CurrentLSN.String(), LagBytes: s.LagBytes,
		RetainedBytes: s.RetainedBytes, WALStatus: s.WALStatus}
}

func cdcCreateCmd() *cobra.Command {
	var (
		url, slot, pub string
		tables         []string
		out            opsOutput
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
			var pubCreated, slotCreated bool
			err = pgcdc.CheckWALLevel(ctx, conn)
			if err == nil {
				pubCreated, err = pgcdc.EnsurePublication(ctx, conn, pub, tables)
			}
			if err == nil {
				slotCreated, err = pgcdc.EnsureSlot(ctx, conn, slot)
			}
			return out.finish(cmd, err, opsResult{
				value: cdcCreateJSON{Publication: pub, PublicationCreated: pubCreated, Slot: slot, SlotCreated: slotCreated},
				text: func(w io.Writer) error {
					_, werr := fmt.Fprintf(w, "publication %s: %s\nslot %s: %s\n", termtext.Escape(pub), createdOrKept(pubCreated), termtext.Escape(slot), createdOrKept(slotCreated))
					return werr
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

// cdcCreateJSON is what cdc create --json prints: whether each was made
// (false: it existed and was kept).
type cdcCreateJSON struct {
	Publication        string `json:"publication"`
	PublicationCreated bool   `json:"publication_created"`
	Slot               string `json:"slot"`
	SlotCreated        bool   `json:"slot_created"`
}

func createdOrKept(created bool) string {
	if created {
		return "created"
	}
	return "exists, kept"
}

// cdcDropJSON is what cdc drop --json prints: the slot and publication
// that no longer exist ("" for one not named).
type cdcDropJSON struct {
	Slot        string `json:"slot"`
	Publication string `json:"publication"`
}

func cdcDropCmd() *cobra.Command {
	var (
		url, slot, pub string
		out            opsOutput
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
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			if slot != "" {
				err = pgcdc.DropSlot(ctx, conn, slot)
			}
			if err == nil && pub != "" {
				err = pgcdc.DropPublication(ctx, conn, pub)
			}
			return out.finish(cmd, err, opsResult{value: cdcDropJSON{Slot: slot, Publication: pub}})
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "the PostgreSQL database (required)")
	f.StringVar(&slot, "slot", "", "the replication slot to drop")
	f.StringVar(&pub, "publication", "", "the publication to drop")
	out.register(f, false)
	return cmd
}
