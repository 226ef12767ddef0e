package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
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
var operatorCommands = map[string]bool{"serve": true, "streams": true, "all": true, "subs": true, "parked": true, "cdc": true, "projections": true,
	"init": true, "append": true, "retention": true, "erase": true, "erasures": true, "keys": true, "verify": true}

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

--store names the store; without it, $VARVE_STORE does (an explicit --store wins). It
is memory:, sqlite:///path/file.db (or sqlite:relative.db), a bare path of a SQLite
file (demo.db, ./data/x.db, /abs/x.db), postgres://user@host/db?varve_schema=s,
nats://host:4222?stream=S&prefix=p, or the shorthands postgres and nats
($VARVE_POSTGRES_URL, $VARVE_NATS_URL). The store is opened as it is: nothing is
created, and a missing file, schema or stream is an error (varve init creates one).
--json prints plain JSON of what the command lists or did (docs/lab.md has the shapes).
Exit codes: 0 ok, 1 an error (nothing printed) or a --max-* bound exceeded, 2 usage,
130 interrupted.`

// storeEnv names the store of an operator command given no --store.
const storeEnv = "VARVE_STORE"

// storeFlagHelp is the help of an operator command's --store.
const storeFlagHelp = "URL or SQLite file path of the store (default $" + storeEnv + "; nothing is created)"

// resolveExisting checks the store of an operator command before anything
// opens: --store when given, else $VARVE_STORE; a bare path is a SQLite
// file (storeURL). A usage error when there is none or it is malformed;
// the error names where the store came from.
func resolveExisting(cmd *cobra.Command, given string) (*lab.Target, error) {
	source := "--store"
	if f := cmd.Flags().Lookup("store"); f == nil || !f.Changed {
		if env := strings.TrimSpace(os.Getenv(storeEnv)); env != "" {
			given, source = env, "$"+storeEnv
		}
	}
	if strings.TrimSpace(given) == "" {
		return nil, usagef("--store: give the URL or file of the store, or set $%s (see --help)", storeEnv)
	}
	raw, err := storeURL(given)
	if err != nil {
		return nil, usage(fmt.Errorf("%s: %w", source, err))
	}
	t, err := lab.Resolve(raw, "", lab.Existing)
	if err != nil {
		return nil, usage(fmt.Errorf("%s: %w", source, err))
	}
	return t, nil
}

// storeShorthands are the values of --store that are neither a URL nor a
// path (lab.Resolve knows them), with or without a trailing ":".
var storeShorthands = map[string]bool{"mem": true, "memory": true, "sqlite": true, "postgres": true, "postgresql": true, "pg": true, "nats": true}

// storeURL turns a bare path into the URL of a SQLite file and returns
// every other value as it is. A bare path is a value with no "://" that is
// not a shorthand and that begins with "/", "./" or "../", or has no ":"
// and holds a "/" or a "." (demo.db, data/x.db): "sqlite:///" and its
// absolute path. A word without a dot or slash ("postgress") stays what it
// is, an unknown store, rather than naming a file.
func storeURL(given string) (string, error) {
	s := strings.TrimSpace(given)
	if strings.Contains(s, "://") || storeShorthands[strings.ToLower(strings.TrimSuffix(s, ":"))] {
		return s, nil
	}
	path := strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") ||
		filepath.IsAbs(s) || (!strings.Contains(s, ":") && strings.ContainsAny(s, "/."))
	if !path {
		return s, nil
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return "", fmt.Errorf("SQLite file %s: %w", s, err)
	}
	return (&url.URL{Scheme: "sqlite", Path: filepath.ToSlash(abs)}).String(), nil
}

// initHint is added to the "no such store" error of an operator command.
const initHint = "; varve init --store ... creates it"

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
