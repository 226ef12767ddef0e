package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/shred"
)

const eraseHelp = `

Erasure needs the store's master key, from $VARVE_MASTER_KEY (its text form, which
varve keys new-master prints) or $VARVE_MASTER_KEY_FILE (a file of mode 0600), and the
master keys before the last rotation in $VARVE_PREVIOUS_MASTER_KEYS. docs/privacy.md
says what an erasure reaches and what it cannot.`

func eraseCmd() *cobra.Command {
	var (
		store, subject string
		count, yes     bool
		out            opsOutput
	)
	cmd := &cobra.Command{
		Use:   "erase --subject S [--count] [--yes]",
		Short: "Erase a subject: destroy its data key, so that what it sealed reads as erased",
		Long: `erase destroys the data key of --subject (package shred). From then on every event,
snapshot and parked record sealed with it reads as the erased marker, on this store,
its backups and its replicas; processes that cached the key stop using it within
their cache's TTL (30 s by default). It cannot be undone. The erasure is recorded as a
report in the system stream "$erasure" (varve erasures lists them); --count scans the
whole log first, to count in the report the events, streams, snapshots and parked
records sealed with the key (a read of every event). Read models that remove the
subject's rows add their counts to the report as they do. A subject without a key
(never sealed, or erased already) is an error (exit 1).` + eraseHelp + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if err := varve.CheckName(subject); err != nil {
				return usagef("--subject %q: %v", subject, err)
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var r shred.Report
			run := func() error {
				s, err := openStore(ctx, t.URL)
				if err != nil {
					return err
				}
				defer s.Close()
				sh, err := open.Shredder(s)
				if err != nil {
					return err
				}
				if !yes {
					fmt.Fprintf(cmd.ErrOrStderr(), "Erase subject %q on %s? Its data key is destroyed: what it sealed reads as erased from now on, also in backups and replicas. This cannot be undone.\nType the subject to confirm: ",
						subject, termtext.Escape(t.Label))
					ok, err := confirmName(ctx, subject)
					if err != nil || !ok {
						return notConfirmed(err, "subject %q keeps its key", subject)
					}
				}
				r, err = sh.Erase(ctx, s, subject, shred.EraseOptions{Count: count})
				return err
			}
			err, failed := eraseOutcome(r, run())
			return out.finish(cmd, err, opsResult{
				value:  r,
				text:   func(w io.Writer) error { return printErasure(w, r) },
				failed: failed,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.StringVar(&subject, "subject", "", "the subject to erase (required)")
	f.BoolVar(&count, "count", false, "count what the key sealed first, for the report (reads the whole log)")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask")
	out.register(f, false)
	_ = cmd.MarkFlagRequired("subject")
	return cmd
}

// eraseOutcome splits the error of an erasure: before the key was
// destroyed it is the command's error; after (counting or recording the
// report failed), the report is printed all the same, for the operator
// to see what was erased, and the command fails with failed.
func eraseOutcome(r shred.Report, err error) (runErr, failed error) {
	if err != nil && r.Key != uuid.Nil {
		return nil, err
	}
	return err, nil
}

// printErasure prints a report in a few lines.
func printErasure(w io.Writer, r shred.Report) error {
	fmt.Fprintf(w, "erased %s: key %s (master %s) destroyed at %s\n", termtext.Escape(r.Subject), r.Key, termtext.Escape(r.Master), r.At.Format(time.RFC3339))
	switch {
	case r.CountError != "":
		fmt.Fprintf(w, "  not counted: %s\n", termtext.Escape(r.CountError))
	case r.Counted:
		streams := make([]string, len(r.Streams))
		for i, s := range r.Streams {
			streams[i] = termtext.Escape(s)
		}
		more := ""
		if r.StreamsTruncated {
			more = ", ..."
		}
		fmt.Fprintf(w, "  %d events in %d streams (%s%s), %d snapshots, %d parked records, through position %s\n",
			r.Events, len(r.Streams), strings.Join(streams, ", "), more, r.Snapshots, r.Parked, r.Through)
	default:
		fmt.Fprintln(w, "  not counted (--count counts the events, snapshots and parked records)")
	}
	for _, rm := range r.ReadModels {
		fmt.Fprintf(w, "  read model %s: %d rows removed at %s\n", termtext.Escape(rm.ReadModel), rm.Rows, rm.At.Format(time.RFC3339))
	}
	return nil
}

// erasuresJSON is what varve erasures --json prints.
type erasuresJSON struct {
	Erasures []shred.Report `json:"erasures"`
}

func erasuresCmd() *cobra.Command {
	var (
		store, subject string
		limit          int
		out            opsOutput
	)
	cmd := &cobra.Command{
		Use:   "erasures [--subject S] [--limit N]",
		Short: "List the erasure reports, newest first",
		Long: `erasures lists the reports of the erasures recorded in the system stream "$erasure",
newest first: the subject, the key destroyed, when, the counts (when the erasure
counted) and the rows each read model removed since. It needs no master key.` + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if limit < 0 {
				return usagef("--limit %d: want 0 (all) or more", limit)
			}
			if subject != "" {
				if err := varve.CheckName(subject); err != nil {
					return usagef("--subject %q: %v", subject, err)
				}
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			res := erasuresJSON{Erasures: []shred.Report{}}
			s, err := openStore(ctx, t.URL)
			if err == nil {
				var rs []shred.Report
				if rs, err = shred.Reports(ctx, s, subject, limit); err == nil {
					res.Erasures = append(res.Erasures, rs...)
				}
				s.Close()
			}
			return out.finish(cmd, err, opsResult{
				value: res,
				text:  func(w io.Writer) error { return printErasures(w, res.Erasures) },
				csv:   func(w io.Writer) error { return writeErasuresCSV(w, res.Erasures) },
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.StringVar(&subject, "subject", "", "only the reports of this subject")
	f.IntVar(&limit, "limit", 50, "at most this many reports (0: all)")
	out.register(f, true)
	return cmd
}

// counts is a report's counts in a cell.
func counts(r shred.Report) (events, snapshots, parked string) {
	if !r.Counted {
		return "-", "-", "-"
	}
	return strconv.Itoa(r.Events), strconv.Itoa(r.Snapshots), strconv.Itoa(r.Parked)
}

func readModelRows(r shred.Report) int64 {
	var n int64
	for _, rm := range r.ReadModels {
		n += rm.Rows
	}
	return n
}

func printErasures(w io.Writer, rs []shred.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ERASED AT\tSUBJECT\tKEY\tEVENTS\tSNAPSHOTS\tPARKED\tREAD-MODEL ROWS")
	for _, r := range rs {
		ev, sn, pk := counts(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.At.Format(time.RFC3339), termtext.Escape(r.Subject), r.Key, ev, sn, pk, readModelRows(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d erasures (- : not counted)\n", len(rs))
	return err
}

func writeErasuresCSV(w io.Writer, rs []shred.Report) error {
	cw := newCSV(w)
	cw.row("erased_at", "subject", "key", "master", "counted", "events", "snapshots", "parked", "read_model_rows", "count_error")
	for _, r := range rs {
		cw.row(r.At.Format(time.RFC3339Nano), r.Subject, r.Key.String(), r.Master, strconv.FormatBool(r.Counted),
			strconv.Itoa(r.Events), strconv.Itoa(r.Snapshots), strconv.Itoa(r.Parked), strconv.FormatInt(readModelRows(r), 10), r.CountError)
	}
	return cw.flush()
}

func keysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Rotate the master key that wraps the data keys; make a new master key",
		Long:  `keys manages the master key of crypto-shredding (package shred).` + eraseHelp,
	}
	cmd.AddCommand(keysRotateCmd(), keysNewMasterCmd())
	return cmd
}

func keysRotateCmd() *cobra.Command {
	var (
		store string
		out   opsOutput
	)
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Wrap every data key with the current master key",
		Long: `rotate wraps again with the current master key ($VARVE_MASTER_KEY or
$VARVE_MASTER_KEY_FILE) every data key that an older one wrapped, one key at a time,
while the store serves reads and writes; the older master keys must be in
$VARVE_PREVIOUS_MASTER_KEYS. Once it has run, the older master keys can be destroyed:
backups taken before hold keys that only those unwrap.` + eraseHelp + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var r shred.RotateReport
			s, err := openStore(ctx, t.URL)
			if err == nil {
				var sh *shred.Shredder
				if sh, err = open.Shredder(s); err == nil {
					r, err = sh.Rotate(ctx)
				}
				s.Close()
			}
			return out.finish(cmd, err, opsResult{
				value: r,
				text: func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "rotated: %d keys wrapped again, %d wrapped by the current master key already, %d changed by another process meanwhile (left alone)\n",
						r.Rewrapped, r.Current, r.Raced)
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

func keysNewMasterCmd() *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "new-master --id ID",
		Short: "Print a new random master key in its text form",
		Long: `new-master prints a new master key (32 random bytes) in the text form that
$VARVE_MASTER_KEY and $VARVE_MASTER_KEY_FILE take, "<id>:<key>". Keep it where only the
application can read it (a secret store, a file of mode 0600): whoever holds it and a
copy of the store reads every subject that is not erased. The id names the key in the
store (each data key records the id of the master key that wrapped it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			text, err := shred.NewMasterKeyText(id)
			if err != nil {
				return usage(err)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "a new master key; store it safely, it is not shown again:")
			_, err = fmt.Fprintln(cmd.OutOrStdout(), text)
			return err
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "the master key's id: 1 to 64 bytes without ':' (required)")
	_ = cmd.MarkFlagRequired("id")
	return cmd
}
