package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
)

// appendIn is where varve append reads the event's data when no flag
// gives it; tests replace it.
var appendIn io.Reader = os.Stdin

// appendJSON is what varve append --json prints: the event's id (the one
// to give --id to send it again), its version and position, and whether
// the store had it already (a re-send of the same id: nothing written).
type appendJSON struct {
	Stream   string         `json:"stream"`
	ID       uuid.UUID      `json:"id"`
	Type     string         `json:"type"`
	Version  varve.Version  `json:"version"`
	Position varve.Position `json:"position"`
	Existed  bool           `json:"existed"`
}

func appendCmd() *cobra.Command {
	var (
		store, typ, data, dataFile, metadata, expected, id string
		raw                                                bool
		out                                                opsOutput
	)
	cmd := &cobra.Command{
		Use:   "append STREAM --type T [--data JSON | --data-file F | stdin]",
		Short: "Append one event to a stream, with an expected version",
		Long: `append writes one event of type --type to STREAM and prints its version and position.

The event's data is --data, or the contents of --data-file (- for stdin), or, with
neither, what stdin holds when it is a pipe or a file (a terminal gives no data).
varve stores the data as bytes; append wants them to be JSON unless --raw is given
(then they are stored as they are, which suits a binary file), so that a shell's lost
quote is not stored as an event. --metadata is JSON. An event has at most 1 MiB of
data and metadata.

--expected is the version the stream must be at: any (the default), no-stream (it
has no events), stream-exists (or exists: it has at least one) or a version number;
another version is an error that says the stream's actual version (exit 1).

Every event has an id: --id, or a new one that append prints. Sending the same
--id again is idempotent: the store returns the first append's version and
position and writes nothing (the output says the event existed); the same id
with another type, data or metadata is an error (exit 1), and the stream keeps the
first. Streams whose ids begin with "$" are varve's own: append refuses them.` + opsStoreHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			stream := args[0]
			if err := varve.CheckStreamID(stream); err != nil {
				return usage(fmt.Errorf("stream %q: %w", stream, err))
			}
			if typ == "" {
				return usagef("--type: give the event's type")
			}
			exp, err := parseExpected(expected)
			if err != nil {
				return err
			}
			ev := varve.Event{Type: typ}
			if id != "" {
				u, err := uuid.Parse(id)
				if err != nil || u == uuid.Nil {
					return usagef("--id %q: want a UUID other than the nil UUID", id)
				}
				ev.ID = u
			} else {
				ev.ID = varve.NewEventID()
			}
			if cmd.Flags().Changed("data") && dataFile != "" {
				return usagef("--data and --data-file: give one of them")
			}
			if ev.Metadata, err = jsonFlag("metadata", metadata); err != nil {
				return err
			}
			t, err := resolveExisting(cmd, store)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var res appendJSON
			run := func() error {
				if ev.Data, err = eventData(ctx, cmd.Flags().Changed("data"), data, dataFile, raw); err != nil {
					return err
				}
				s, err := openStore(ctx, t.URL)
				if err != nil {
					return err
				}
				defer s.Close()
				res, err = appendOne(ctx, s, stream, exp, ev)
				return err
			}
			err = run()
			return out.finish(cmd, err, opsResult{
				value: res,
				text: func(w io.Writer) error {
					what := "appended"
					if res.Existed {
						what = "existed already (nothing written):"
					}
					_, err := fmt.Fprintf(w, "%s %s to %s: version %d, position %s, id %s\n", what, termtext.Escape(res.Type),
						termtext.Escape(res.Stream), res.Version, res.Position, res.ID)
					return err
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp)
	f.StringVar(&typ, "type", "", "the event's type (required)")
	f.StringVar(&data, "data", "", "the event's data: JSON, or any text with --raw")
	f.StringVar(&dataFile, "data-file", "", "read the event's data from this file (- for stdin)")
	f.BoolVar(&raw, "raw", false, "store the data as it is, without checking that it is JSON")
	f.StringVar(&metadata, "metadata", "", "the event's metadata, JSON")
	f.StringVar(&expected, "expected", "any", "the version the stream must be at: any, no-stream, stream-exists (exists) or a number")
	f.StringVar(&id, "id", "", "the event's id, a UUID (default: a new one); the same id again appends nothing")
	out.register(f, false)
	return cmd
}

// parseExpected parses --expected: the API's words ("any", "no-stream",
// "stream-exists"), "exists" for short, or a version number.
func parseExpected(s string) (varve.ExpectedVersion, error) {
	switch s {
	case "any":
		return varve.Any, nil
	case "no-stream":
		return varve.NoStream, nil
	case "stream-exists", "exists":
		return varve.StreamExists, nil
	}
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, usagef(`--expected %q: want "any", "no-stream", "stream-exists" ("exists") or a version number`, s)
	}
	return varve.Exact(n), nil
}

// jsonFlag checks that the value of a JSON flag is JSON (UTF-8); empty
// is none.
func jsonFlag(name, v string) ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	if err := checkJSON([]byte(v)); err != nil {
		return nil, usagef("--%s: %v", name, err)
	}
	return []byte(v), nil
}

// checkJSON says what is wrong with b as a JSON value, if anything.
func checkJSON(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("not UTF-8, so not JSON (--raw stores bytes as they are)")
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %v (--raw stores bytes as they are)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not JSON: more than one value (--raw stores bytes as they are)")
	}
	return nil
}

// eventData returns the event's data: --data (given says it was), the
// file, or stdin unless it is a terminal; checked as JSON unless raw.
func eventData(ctx context.Context, given bool, data, file string, raw bool) ([]byte, error) {
	var (
		b    []byte
		from = "--data"
	)
	switch {
	case given:
		b = []byte(data)
	case file != "":
		from = "--data-file " + file
		in := appendIn
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return nil, usage(fmt.Errorf("--data-file: %w", err))
			}
			defer f.Close()
			in = f
		}
		var err error
		if b, err = readData(ctx, in, from); err != nil {
			return nil, err
		}
	default:
		if f, ok := appendIn.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				return nil, nil // a terminal (or /dev/null): no data
			}
		}
		from = "stdin"
		var err error
		if b, err = readData(ctx, appendIn, from); err != nil {
			return nil, err
		}
	}
	if len(b) == 0 || raw {
		return b, nil
	}
	if err := checkJSON(b); err != nil {
		return nil, usagef("%s: %v", from, err)
	}
	return b, nil
}

// readData reads the data of an event from r, at most the largest event's
// size; the read ends when ctx does (the interrupt), as confirmName's.
func readData(ctx context.Context, r io.Reader, from string) ([]byte, error) {
	type read struct {
		b   []byte
		err error
	}
	got := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, varve.DefaultMaxEventSize+1))
		got <- read{b, err}
	}()
	select {
	case g := <-got:
		if g.err != nil {
			return nil, fmt.Errorf("%s: %w", from, g.err)
		}
		if len(g.b) > varve.DefaultMaxEventSize {
			return nil, usagef("%s: more than %d bytes, the largest event", from, varve.DefaultMaxEventSize)
		}
		return g.b, nil
	case <-ctx.Done():
		if c, ok := r.(io.Closer); ok {
			_ = c.Close()
		}
		return nil, context.Cause(ctx)
	}
}

// appendOne appends ev and tells a re-send from a new append: when the
// stream was at or beyond the returned version before, the event was there
// (an idempotent retry of its id); if the stored event differs from ev,
// that is an error wrapping varve.ErrDuplicateEvent.
func appendOne(ctx context.Context, s *varve.Store, stream string, exp varve.ExpectedVersion, ev varve.Event) (appendJSON, error) {
	var before varve.Version
	if info, err := s.StreamInfo(ctx, stream); err == nil && !info.Deleted {
		before = info.Version
	} else if err != nil && !errors.Is(err, varve.ErrStreamNotFound) && !errors.Is(err, varve.ErrStreamDeleted) &&
		!errors.Is(err, varve.ErrInvalidArgument) {
		return appendJSON{}, err
	}
	r, err := s.Append(ctx, stream, exp, ev)
	if err != nil {
		return appendJSON{}, err
	}
	res := appendJSON{Stream: stream, ID: ev.ID, Type: ev.Type, Version: r.LastVersion, Position: r.Position, Existed: r.LastVersion <= before}
	if !res.Existed {
		return res, nil
	}
	for got, err := range s.ReadStream(ctx, stream, varve.From(r.LastVersion), varve.Limit(1)) {
		if errors.Is(err, varve.ErrStreamNotFound) {
			break // truncated or deleted since: nothing to compare
		}
		if err != nil {
			return appendJSON{}, err
		}
		if got.ID != ev.ID || got.Version != r.LastVersion {
			break
		}
		var diff []string
		if got.Type != ev.Type {
			diff = append(diff, "type "+strconv.Quote(got.Type))
		}
		if !bytes.Equal(got.Data, ev.Data) {
			diff = append(diff, "other data")
		}
		if !bytes.Equal(got.Metadata, ev.Metadata) {
			diff = append(diff, "other metadata")
		}
		if len(diff) > 0 {
			return appendJSON{}, fmt.Errorf("append to stream %q: event %s is there already, at version %d, with %s: nothing was written (give a new --id for a new event): %w",
				stream, ev.ID, r.LastVersion, strings.Join(diff, ", "), varve.ErrDuplicateEvent)
		}
	}
	return res, nil
}
