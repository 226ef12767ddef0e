package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/server"
)

// Command groups of `varve --help`: the lab measures; operator commands
// look at and repair a store that is in use.
const (
	groupLab = "lab"
	groupOps = "ops"
)

// operatorCommands are the commands that work on a store as it is.
var operatorCommands = map[string]bool{"serve": true, "streams": true, "all": true, "subs": true, "parked": true, "cdc": true, "projections": true}

// groupCommands sorts the root's commands into the lab's and the
// operator's, for the help.
func groupCommands(root *cobra.Command) {
	root.AddGroup(&cobra.Group{ID: groupLab, Title: "Lab commands (measure a store; a temporary one by default):"},
		&cobra.Group{ID: groupOps, Title: "Operator commands (a store as it is, named by --store):"})
	for _, c := range root.Commands() {
		switch {
		case operatorCommands[c.Name()]:
			c.GroupID = groupOps
		case c.Name() != "version" && c.Name() != "help" && c.Name() != "completion":
			c.GroupID = groupLab
		}
	}
}

// opsStoreHelp ends the help of the operator commands.
const opsStoreHelp = `

--store is required: memory:, sqlite:///path/file.db (or sqlite:relative.db),
postgres://user@host/db?varve_schema=s, nats://host:4222?stream=S&prefix=p, or the
shorthands postgres and nats ($VARVE_POSTGRES_URL, $VARVE_NATS_URL). The store is
opened as it is: nothing is created, and a missing file, schema or stream is an error.
--json prints plain JSON of what the command lists or did (docs/lab.md has the shapes).
Exit codes: 0 ok, 1 an error (nothing printed) or a --max-* bound exceeded, 2 usage,
130 interrupted.`

// resolveExisting checks --store of an operator command before anything
// opens: a usage error when it is missing or malformed.
func resolveExisting(given string) (*lab.Target, error) {
	if strings.TrimSpace(given) == "" {
		return nil, usagef("--store: give the URL of the store (see --help)")
	}
	t, err := lab.Resolve(given, "", lab.Existing)
	if err != nil {
		return nil, usage(fmt.Errorf("--store: %w", err))
	}
	return t, nil
}

// parsePosition parses a position flag: "start", "end" (last, from the
// store) or a position's text form.
func parsePosition(ctx context.Context, store *varve.Store, flag, s string) (varve.Position, error) {
	switch s {
	case "", "start":
		return varve.Start, nil
	case "end":
		return store.LastPosition(ctx)
	}
	p, err := varve.ParsePosition(s)
	if err != nil {
		return p, usagef(`--%s %q: want "start", "end" or a position ("12", "7:3")`, flag, s)
	}
	return p, nil
}

// printEvent writes an event for a person: a head line, then its data
// (and metadata, when withMeta) indented, JSON pretty-printed; every text
// of the event escaped for a terminal (termtext.Escape, each line of the
// JSON on its own).
func printEvent(w io.Writer, e varve.RecordedEvent, withMeta bool) {
	fmt.Fprintf(w, "%s@%d  %s  position %s  %s  %s\n", termtext.Escape(e.Stream), e.Version, termtext.Escape(e.Type), e.Position,
		e.RecordedAt.Format(time.RFC3339Nano), e.ID)
	body := func(label string, b []byte) {
		if len(b) == 0 {
			return
		}
		var out bytes.Buffer
		if json.Valid(b) && json.Indent(&out, b, "    ", "  ") == nil {
			fmt.Fprintf(w, "  %s: %s\n", label, escapeLines(strings.TrimRight(out.String(), " \t\r\n")))
			return
		}
		fmt.Fprintf(w, "  %s (%d bytes, not JSON): %q\n", label, len(b), clip(b, 200))
	}
	body("data", e.Data)
	if withMeta {
		body("metadata", e.Metadata)
	}
}

// escapeLines escapes each line of s for a terminal (termtext.Escape),
// keeping its line breaks.
func escapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = termtext.Escape(l)
	}
	return strings.Join(lines, "\n")
}

func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// eventLines writes events as JSON lines, the API's event shape, for the
// --json of the tail commands; exact, and safe on a terminal
// (termtext.JSON).
type eventLines struct{ enc *json.Encoder }

func newEventLines(w io.Writer) eventLines {
	return eventLines{json.NewEncoder(termtext.JSONWriter(w))}
}

func (l eventLines) write(e varve.RecordedEvent) error { return l.enc.Encode(server.EventOf(e)) }

// waitForEvents waits for events after a read came up empty: the store's
// wake-up, or a poll when it has none. It returns false when ctx ends.
func waitForEvents(ctx context.Context, watch <-chan struct{}) bool {
	var poll <-chan time.Time
	if watch == nil {
		t := time.NewTimer(500 * time.Millisecond)
		defer t.Stop()
		poll = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-watch:
	case <-poll:
	}
	return true
}
