package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/server"
)

// maxListAll bounds the streams `streams ls --all` prints.
const maxListAll = 1_000_000

func streamsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "streams",
		Short: "List streams, show one with its events, tail one; truncate, delete or tombstone one",
		Long: `streams ls, show and tail read a store's streams; they change nothing. streams
truncate, delete and tombstone change a stream's life, each after asking for its id
(--yes does not ask).` + opsStoreHelp,
	}
	cmd.AddCommand(streamsLsCmd(), streamsShowCmd(), streamsTailCmd(), streamsTruncateCmd(), streamsDeleteCmd(), streamsTombstoneCmd())
	return cmd
}

func streamsLsCmd() *cobra.Command {
	var (
		store, prefix, after string
		limit                int
		system, all          bool
		out                  opsOutput
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List streams by id prefix, in byte order",
		Long: `ls lists the streams whose ids begin with --prefix, in byte order of their ids, with
their version, last position, update time and state (live, deleted, tombstoned).
System streams ("$parked-...") are left out unless --system is given or the prefix
begins with "$". --limit bounds the page; the next page starts --after the last id
printed (the table's last line says so), or --all prints every page.` + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if err := countFlag("limit", limit, 1, varve.MaxListLimit); err != nil {
				return err
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			list := []server.Stream{}
			next := ""
			s, err := openStore(ctx, t.URL)
			if err == nil {
				q := varve.ListQuery{Prefix: prefix, After: after, Limit: limit}
				for {
					var page varve.StreamPage
					page, err = s.Streams().List(ctx, q, system)
					if err != nil {
						break
					}
					for _, info := range page.Streams {
						list = append(list, server.StreamOf(info))
					}
					next = page.Next
					if !all || next == "" || len(list) >= maxListAll {
						break
					}
					q.After = next
				}
				s.Close()
			}
			if errors.Is(err, varve.ErrNotSupported) {
				err = fmt.Errorf("%s cannot list its streams: %w", t.Label, err)
			}
			page := streamsJSON{Streams: list}
			if next != "" {
				page.Next = &next
			}
			return out.finish(cmd, err, opsResult{
				value: page,
				text:  func(w io.Writer) error { return printStreams(w, list, next) },
				csv:   func(w io.Writer) error { return writeStreamsCSV(w, list) },
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.StringVar(&prefix, "prefix", "", "only streams whose ids begin with this")
	f.StringVar(&after, "after", "", "start after this stream id (the last one of the previous page)")
	f.IntVar(&limit, "limit", 100, "streams per page")
	f.BoolVar(&all, "all", false, "print every page, not only the first")
	f.BoolVar(&system, "system", false, `include system streams ("$parked-...")`)
	out.register(f, true)
	return cmd
}

// streamsJSON is what streams ls --json prints, the API's page of
// streams: next is the id to go on --after, null after the last page.
type streamsJSON struct {
	Streams []server.Stream `json:"streams"`
	Next    *string         `json:"next"`
}

func state(s server.Stream) string {
	switch {
	case s.Tombstoned:
		return "tombstoned"
	case s.Deleted:
		return "deleted"
	}
	return "live"
}

func printStreams(w io.Writer, list []server.Stream, next string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tVERSION\tLAST POSITION\tUPDATED\tSTATE")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", termtext.Escape(s.Stream), s.Version, s.LastPosition, s.UpdatedAt.Format(time.RFC3339), state(s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		_, err := fmt.Fprintf(w, "%d streams; more follow: --after %s\n", len(list), strconv.Quote(next))
		return err
	}
	_, err := fmt.Fprintf(w, "%d streams\n", len(list))
	return err
}

func writeStreamsCSV(w io.Writer, list []server.Stream) error {
	cw := newCSV(w)
	cw.row("stream", "version", "last_position", "created_at", "updated_at", "state")
	for _, s := range list {
		cw.row(s.Stream, strconv.FormatUint(s.Version, 10), s.LastPosition.String(),
			s.CreatedAt.Format(time.RFC3339Nano), s.UpdatedAt.Format(time.RFC3339Nano), state(s))
	}
	return cw.flush()
}

// defaultShowBytes bounds the event data and metadata a command holds to
// print at once: streams show's page (--max-bytes) and the last events of
// streams tail.
const defaultShowBytes = 16 << 20

func streamsShowCmd() *cobra.Command {
	var (
		store     string
		from      uint64
		limit     int
		maxBytes  int
		backward  bool
		out       opsOutput
		noMetaOut bool
	)
	cmd := &cobra.Command{
		Use:   "show STREAM",
		Short: "Show a stream's info and a page of its events, data pretty-printed",
		Long: `show prints a stream's version, positions, times and state, then --limit events from
its start (or from --from), or from its end with --backward; JSON data and metadata
are pretty-printed.` + opsStoreHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if err := countFlag("limit", limit, 1, varve.MaxListLimit); err != nil {
				return err
			}
			if maxBytes < 1 {
				return usagef("--max-bytes %d: want at least 1", maxBytes)
			}
			id := args[0]
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var (
				info   varve.StreamInfo
				events []varve.RecordedEvent
				next   varve.Version // where a page cut by --max-bytes goes on
			)
			s, err := openStore(ctx, t.URL)
			if err == nil {
				info, err = s.StreamInfo(ctx, id)
				if err == nil && !info.Deleted {
					opts := []varve.StreamOption{varve.Limit(limit), varve.From(from)}
					if backward {
						opts = append(opts, varve.ReadBackward())
					}
					held := 0
					for e, rerr := range s.ReadStream(ctx, id, opts...) {
						if rerr != nil {
							err = rerr
							break
						}
						events = append(events, e)
						if held += e.Size(); held >= maxBytes && len(events) < limit {
							next = e.Version + 1
							if backward {
								next = e.Version - 1
							}
							break
						}
					}
				}
				s.Close()
			}
			evs := make([]server.Event, len(events))
			for i, e := range events {
				evs[i] = server.EventOf(e)
			}
			page := showJSON{Stream: server.StreamOf(info), Events: evs}
			if next > 0 {
				page.Next = &next
			}
			return out.finish(cmd, err, opsResult{
				value: page,
				text: func(w io.Writer) error {
					si := server.StreamOf(info)
					fmt.Fprintf(w, "stream %s: version %d, last position %s, %s\ncreated %s, updated %s\n\n", termtext.Escape(info.Stream), info.Version,
						info.LastPosition, state(si), info.CreatedAt.Format(time.RFC3339), info.UpdatedAt.Format(time.RFC3339))
					for _, e := range events {
						printEvent(w, e, !noMetaOut)
					}
					if next > 0 {
						_, werr := fmt.Fprintf(w, "%d events (--max-bytes reached: the next page is --from %d)\n", len(events), next)
						return werr
					}
					_, werr := fmt.Fprintf(w, "%d events\n", len(events))
					return werr
				},
				csv: func(w io.Writer) error { return writeEventsCSV(w, events) },
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.Uint64Var(&from, "from", 0, "first version to show (0: the first, or the last with --backward)")
	f.IntVar(&limit, "limit", 20, "events to show")
	f.IntVar(&maxBytes, "max-bytes", defaultShowBytes, "stop the page after the event that takes its data and metadata to this many bytes (at least one event)")
	f.BoolVar(&backward, "backward", false, "newest first")
	f.BoolVar(&noMetaOut, "no-metadata", false, "leave the events' metadata out of the table")
	out.register(f, true)
	return cmd
}

// showJSON is what streams show --json prints: the stream's info, the
// page of events (the API's event shape) and, when --max-bytes cut the
// page, the version the next page starts --from (else null).
type showJSON struct {
	Stream server.Stream  `json:"stream"`
	Events []server.Event `json:"events"`
	Next   *varve.Version `json:"next"`
}

func writeEventsCSV(w io.Writer, events []varve.RecordedEvent) error {
	cw := newCSV(w)
	cw.row("stream", "version", "position", "type", "id", "recorded_at", "data", "metadata")
	for _, e := range events {
		cw.row(e.Stream, strconv.FormatUint(e.Version, 10), e.Position.String(), e.Type, e.ID.String(),
			e.RecordedAt.Format(time.RFC3339Nano), string(e.Data), string(e.Metadata))
	}
	return cw.flush()
}

func streamsTailCmd() *cobra.Command {
	var (
		store    string
		n        int
		follow   bool
		jsonOut  bool
		maxCount int
	)
	cmd := &cobra.Command{
		Use:   "tail STREAM",
		Short: "Print a stream's last events, and with -f the ones appended after",
		Long: `tail prints the last -n events of a stream, oldest first, like tail(1); with -f it
then prints the events appended to the stream until interrupted (or until --count
events were printed). --json prints one JSON object per event (the API's event shape),
a line each, instead of the text.` + opsStoreHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := countFlag("lines", n, 0, varve.MaxListLimit); err != nil {
				return err
			}
			if err := countFlag("count", maxCount, 0, maxEvents); err != nil {
				return err
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := openStore(ctx, t.URL)
			if err != nil {
				return err
			}
			defer s.Close()
			w := cmd.OutOrStdout()
			lines := newEventLines(w)
			printed := 0
			emit := func(e varve.RecordedEvent) error {
				printed++
				if jsonOut {
					return lines.write(e)
				}
				printEvent(w, e, false)
				return nil
			}
			id := args[0]
			var last varve.Version
			if n > 0 {
				// The last n events, or fewer: as many as defaultShowBytes
				// of data and metadata hold (at least one).
				var tailEvents []varve.RecordedEvent
				held := 0
				for e, err := range s.ReadStream(ctx, id, varve.ReadBackward(), varve.Limit(n)) {
					if err != nil {
						return err
					}
					tailEvents = append(tailEvents, e)
					if held += e.Size(); held >= defaultShowBytes {
						break
					}
				}
				for i := len(tailEvents) - 1; i >= 0; i-- {
					if err := emit(tailEvents[i]); err != nil {
						return err
					}
				}
				if len(tailEvents) > 0 {
					last = tailEvents[0].Version
				}
			}
			if !follow {
				return nil
			}
			if last == 0 {
				info, err := s.StreamInfo(ctx, id)
				if err != nil && !errors.Is(err, varve.ErrStreamNotFound) {
					return err
				}
				last = info.Version
			}
			for maxCount == 0 || printed < maxCount {
				watch := s.Watch()
				got := 0
				for e, err := range s.ReadStream(ctx, id, varve.From(last+1)) {
					if errors.Is(err, varve.ErrStreamNotFound) {
						break
					}
					if err != nil {
						return err
					}
					if err := emit(e); err != nil {
						return err
					}
					last, got = e.Version, got+1
					if maxCount > 0 && printed >= maxCount {
						return nil
					}
				}
				if got == 0 && !waitForEvents(ctx, watch) {
					return ctx.Err()
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.IntVarP(&n, "lines", "n", 10, "how many of the last events to print first")
	f.BoolVarP(&follow, "follow", "f", false, "then print the events appended to the stream, until interrupted")
	f.IntVar(&maxCount, "count", 0, "stop after printing this many events (0: no limit)")
	f.BoolVar(&jsonOut, "json", false, "print one JSON object per event, a line each")
	return cmd
}
