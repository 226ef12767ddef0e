package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
)

// lifecycleJSON is what streams truncate, delete and tombstone --json
// print: the stream, what was done, the stream's version when it was done
// and, for truncate, the first version kept.
type lifecycleJSON struct {
	Stream  string         `json:"stream"`
	Action  string         `json:"action"`
	Version varve.Version  `json:"version"`
	Before  *varve.Version `json:"before,omitempty"`
}

// lifecycleHelp ends the help of streams truncate, delete and tombstone.
const lifecycleHelp = `

It asks for the stream's id on stdin before it writes (a script may pipe the id in)
and changes nothing without it: the id as given, or as the question quotes it (the
way to type an id with blanks around it or control characters); an interrupt ends the
question at once; --yes skips it. Streams whose ids begin with "$" are varve's own
(parked events, projections' control streams): the store refuses to change them here
(varve parked skip drops parked events). A stream that is not there, or was deleted,
is an error (exit 1).`

func streamsTruncateCmd() *cobra.Command {
	cmd := lifecycleCmd("truncate", "truncate STREAM --before N", "Remove a stream's events below a version (asks first)",
		`truncate removes the events of STREAM with versions below --before; the stream keeps its
version, and the next append goes on after it. Readers of the stream and of $all no
longer see the removed events; a --before past the end removes them all.`)
	cmd.Flags().Uint64("before", 0, "remove the events with versions below this one (required, at least 1)")
	return cmd
}

func streamsDeleteCmd() *cobra.Command {
	return lifecycleCmd("delete", "delete STREAM", "Delete a stream's events; a later append starts it afresh (asks first)",
		`delete removes every event of STREAM, if the stream is at the version --expected says
(default any). Its id stays usable: a later append with no-stream or any starts the
stream afresh at version 1. For good, see streams tombstone.`)
}

func streamsTombstoneCmd() *cobra.Command {
	return lifecycleCmd("tombstone", "tombstone STREAM", "Delete a stream for good: every later append fails (asks first)",
		`tombstone deletes STREAM for good, if it is at the version --expected says (default
any): its events are removed, and every later read or append of it fails with "stream
deleted". It cannot be undone. A stream never written can be tombstoned, which
reserves its id.`)
}

// lifecycleCmd is streams truncate, delete or tombstone (action).
func lifecycleCmd(action, use, short, long string) *cobra.Command {
	var (
		store, expected string
		yes             bool
		out             opsOutput
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long + lifecycleHelp + opsStoreHelp,
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		stream := args[0]
		if err := varve.CheckStreamID(stream); err != nil {
			return usage(fmt.Errorf("stream %q: %w", stream, err))
		}
		var before varve.Version
		exp := varve.Any
		if action == "truncate" {
			f := cmd.Flags().Lookup("before")
			if !f.Changed {
				return usagef("--before: give the first version to keep")
			}
			before, _ = cmd.Flags().GetUint64("before")
			if before < 1 {
				return usagef("--before 0: want a version, at least 1")
			}
		} else {
			var err error
			if exp, err = parseExpected(expected); err != nil {
				return err
			}
		}
		t, err := resolveExisting(cmd, store)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		res := lifecycleJSON{Stream: stream, Action: action}
		run := func() error {
			s, err := openStore(ctx, t.URL)
			if err != nil {
				return err
			}
			defer s.Close()
			info, err := s.StreamInfo(ctx, stream)
			missing := errors.Is(err, varve.ErrStreamNotFound)
			switch {
			case missing && action == "tombstone":
			case err != nil:
				return err
			case info.Tombstoned:
				return fmt.Errorf("stream %q: it is tombstoned already: %w", stream, varve.ErrStreamDeleted)
			case info.Deleted && action != "tombstone":
				return fmt.Errorf("stream %q: it was deleted: %w", stream, varve.ErrStreamNotFound)
			}
			res.Version = info.Version
			if !yes {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s\nType the stream's id to confirm: ", question(action, stream, termtext.Escape(t.Label), info, before))
				ok, err := confirmName(ctx, stream)
				if err != nil || !ok {
					return notConfirmed(err, "stream %q is as it was", stream)
				}
			}
			switch action {
			case "truncate":
				res.Before = &before
				return s.Truncate(ctx, stream, before)
			case "delete":
				return s.Delete(ctx, stream, exp)
			default:
				return s.Tombstone(ctx, stream, exp)
			}
		}
		err = run()
		return out.finish(cmd, err, opsResult{
			value: res,
			text: func(w io.Writer) error {
				var err error
				switch action {
				case "truncate":
					_, err = fmt.Fprintf(w, "truncated %s before version %d (its version stays %d)\n", termtext.Escape(stream), before, res.Version)
				case "delete":
					_, err = fmt.Fprintf(w, "deleted %s (it was at version %d; an append starts it afresh at version 1)\n", termtext.Escape(stream), res.Version)
				default:
					_, err = fmt.Fprintf(w, "tombstoned %s (it was at version %d; every later append fails)\n", termtext.Escape(stream), res.Version)
				}
				return err
			},
		})
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	if action != "truncate" {
		f.StringVar(&expected, "expected", "any", "the version the stream must be at: any, no-stream, stream-exists (exists) or a number")
	}
	f.BoolVarP(&yes, "yes", "y", false, "do not ask")
	out.register(f, false)
	return cmd
}

// question is what a lifecycle command asks before it writes; the stream
// id is quoted (strconv.Quote: a control character shows as an escape),
// label is escaped already.
func question(action, stream, label string, info varve.StreamInfo, before varve.Version) string {
	switch action {
	case "truncate":
		return fmt.Sprintf("Remove the events of %q on %s below version %d? (It is at version %d; the version stays.)", stream, label, before, info.Version)
	case "delete":
		return fmt.Sprintf("Delete the events of %q on %s, at version %d? (An append starts it afresh at version 1.)", stream, label, info.Version)
	}
	if info.Version == 0 {
		return fmt.Sprintf("Tombstone %q on %s, a stream with no events? Its id can never be written again.", stream, label)
	}
	return fmt.Sprintf("Tombstone %q on %s, at version %d? Its events are deleted for good and it can never be written again.", stream, label, info.Version)
}
