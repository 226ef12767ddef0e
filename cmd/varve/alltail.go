package main

import (
	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
)

func allCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "all",
		Short: "Follow $all, the global log",
	}
	cmd.AddCommand(allTailCmd())
	return cmd
}

func allTailCmd() *cobra.Command {
	var (
		store, after string
		before       string
		maxCount     int
		noFollow     bool
		backward     bool
		system       bool
		jsonOut      bool
		filter       varve.Filter
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print the events of $all as they are written",
		Long: `tail prints the events of $all after --after (default "end": only events written from
now on; "start": the whole log; or a position), in position order, and waits for more
until interrupted, until --count events were printed, or, with --no-follow, until it
reaches the end. System streams ("$parked-...") are left out unless --system is given.
--category, --type and --stream-prefix keep the events of those categories, event types
or stream prefixes (each a comma-separated list, or the flag again), read through the
store's filtered reads. --json prints one JSON object per event (the API's event shape), a line each.
--backward prints the log newest first instead, from its end or from before --before,
down to its start or --count events, and does not wait.` + opsStoreHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := countFlag("count", maxCount, 0, maxEvents); err != nil {
				return err
			}
			if f := cmd.Flags(); backward && f.Changed("after") || !backward && f.Changed("before") {
				return usagef("--after goes with reads forward, --before with --backward")
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
			opts := []varve.AllOption{filter, varve.PageSize(256)}
			var pos varve.Position
			if backward {
				opts = append(opts, varve.ReadBackward())
				noFollow = true
				if before != "end" {
					if pos, err = varve.ParsePosition(before); err != nil || pos.IsZero() {
						return usagef(`--before %q: want "end" or a position after the start ("12", "7:3")`, before)
					}
				}
			} else {
				pos, err = parsePosition(ctx, s, "after", after)
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			lines := newEventLines(w)
			printed := 0
			buf := make([]varve.RecordedEvent, 0, 256)
			for {
				watch := s.Watch()
				page, err := s.ReadAllPage(ctx, pos, buf[:0], opts...)
				if err != nil {
					return err
				}
				for _, e := range page.Events {
					if !system && len(e.Stream) > 0 && e.Stream[0] == '$' {
						continue
					}
					if jsonOut {
						if err := lines.write(e); err != nil {
							return err
						}
					} else {
						printEvent(w, e, false)
					}
					if printed++; maxCount > 0 && printed >= maxCount {
						return nil
					}
				}
				pos = page.Through
				if page.Full {
					continue
				}
				if noFollow || !waitForEvents(ctx, watch) {
					return ctx.Err()
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.StringVar(&after, "after", "end", `print the events after this position: "end", "start" or a position ("12", "7:3")`)
	f.IntVar(&maxCount, "count", 0, "stop after printing this many events (0: no limit)")
	f.BoolVar(&noFollow, "no-follow", false, "stop at the end of the log instead of waiting for more")
	f.BoolVar(&backward, "backward", false, "print the log newest first, from its end (or --before) down, without waiting")
	f.StringVar(&before, "before", "end", `with --backward, print the events before this position: "end" or a position`)
	f.BoolVar(&system, "system", false, `include the events of system streams ("$parked-...")`)
	f.BoolVar(&jsonOut, "json", false, "print one JSON object per event, a line each")
	f.StringSliceVar(&filter.Categories, "category", nil, "only the events of these categories")
	f.StringSliceVar(&filter.Types, "type", nil, "only the events of these types")
	f.StringSliceVar(&filter.StreamPrefixes, "stream-prefix", nil, "only the events of streams with these prefixes")
	return cmd
}
