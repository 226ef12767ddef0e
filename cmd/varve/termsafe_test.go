package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/projection"
)

// hostile is text a terminal acts on: OSC 52 (set the clipboard), a title,
// CSI sequences (clear, cursor up), BEL, CR, backspace, DEL, the C1 CSI,
// bidi overrides and isolates, a zero-width space, a tab and a newline.
const hostile = "\x1b]52;c;cHduZWQ=\x07\x1b]0;title\x07\x1b[2J\x1b[1A\r\b\x7f\u009b31m\u202eevil\u2066\u200b\t|\n|"

// hostileFixture is a store full of hostile text and what it holds.
type hostileFixture struct {
	url, stream, checkpoint, projection, failure string
	binary, jsonData                             []byte
	parked                                       []delivery.ParkedEvent
}

// hostileStore makes a SQLite store whose stream ids, event types, data,
// metadata, checkpoint names, parked records (subscription "hooks") and
// projection failures hold hostile text.
func hostileStore(t *testing.T) hostileFixture {
	t.Helper()
	f := hostileFixture{
		url:        "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "hostile.db")),
		stream:     "evil-" + hostile,
		checkpoint: "sub-" + hostile,
		projection: "p" + strings.ReplaceAll(hostile, "-v", ""),
		failure:    "handler: " + hostile + "\xff",
		binary:     []byte("\x1b]52;c;eA==\x07\xff\xfe\x00" + hostile),
		jsonData:   []byte(`{"k":"` + "\u009b\u202e\u2066\u200b" + `x"}`),
	}
	ctx := context.Background()
	s, err := open.Store(ctx, f.url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Append(ctx, f.stream, varve.NoStream,
		varve.Event{Type: "T" + hostile, Data: f.binary, Metadata: []byte(hostile)},
		varve.Event{Type: "J", Data: f.jsonData})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoints().Save(ctx, f.checkpoint, varve.Start); err != nil {
		t.Fatal(err)
	}
	p := delivery.NewParked(s, "hooks")
	if _, err := p.Park(ctx, delivery.ParkedEvent{Subscription: "hooks", Stream: f.stream, Version: 1, Position: res.Position,
		Type: "T" + hostile, Attempts: 3, Reason: "rejected" + hostile, Error: "webhook: 400: " + hostile + "\xff", ParkedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if f.parked, err = p.List(ctx); err != nil || len(f.parked) != 1 {
		t.Fatalf("parked: %v %v", f.parked, err)
	}
	if err := s.Checkpoints().Save(ctx, projection.CheckpointName(f.projection, 1), varve.Start); err != nil {
		t.Fatal(err)
	}
	record, _ := json.Marshal(map[string]any{"version": 1, "error": f.failure, "at": time.Now().UTC()})
	if _, err := s.System().Append(ctx, projection.ControlStream(f.projection), varve.Any, varve.NewEvent("projection.failed", record)); err != nil {
		t.Fatal(err)
	}
	info, err := projection.Inspect(ctx, s, f.projection)
	if err != nil || info.Failure == nil {
		t.Fatalf("the projection's failure is not recorded: %+v %v", info, err)
	}
	f.failure = info.Failure.Error
	return f
}

// checkTerminalSafe fails unless out is valid UTF-8 whose only character
// that is not graphic is the newline.
func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: invalid UTF-8 reaches the terminal:\n%q", what, out)
		return
	}
	for i, r := range out {
		if r != '\n' && !unicode.IsGraphic(r) {
			t.Errorf("%s: %U at byte %d reaches the terminal:\n%q", what, r, i, out)
			return
		}
	}
}

// TestTerminalSafeOutput runs every command that prints stored or remote
// text over a store full of escape sequences, bidi controls and invalid
// UTF-8, in each output format: no control character reaches the
// terminal, tables keep one line per row, CSV one record per row, and
// --json gives back exactly what the store holds.
func TestTerminalSafeOutput(t *testing.T) {
	f := hostileStore(t)
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "out.json")
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, hostile)
	}))
	defer hook.Close()
	parked := []string{"--store", f.url, "--subscription", "hooks"}

	type jsonCheck func(t *testing.T, r result)
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		lines int // lines of the text output; 0: not checked
		// errLines are the lines of stderr; 0: not checked
		errLines int
		csv      bool
		json     jsonCheck
	}{
		{name: "streams ls", args: []string{"streams", "ls", "--store", f.url, "--prefix", "evil-"}, lines: 3},
		{name: "streams ls csv", args: []string{"streams", "ls", "--store", f.url, "--prefix", "evil-", "--csv"}, csv: true},
		{name: "streams ls json", args: []string{"streams", "ls", "--store", f.url, "--prefix", "evil-", "--json=" + jsonFile},
			json: func(t *testing.T, r result) {
				if got := r.env["streams"].([]any)[0].(map[string]any)["stream"]; got != f.stream {
					t.Errorf("stream %q, want %q", got, f.stream)
				}
			}},
		{name: "streams show", args: []string{"streams", "show", f.stream, "--store", f.url}},
		{name: "streams show csv", args: []string{"streams", "show", f.stream, "--store", f.url, "--csv"}, csv: true},
		{name: "streams show json", args: []string{"streams", "show", f.stream, "--store", f.url, "--json=" + jsonFile},
			json: func(t *testing.T, r result) {
				res := r.env
				if got := res["stream"].(map[string]any)["stream"]; got != f.stream {
					t.Errorf("stream %q, want %q", got, f.stream)
				}
				checkEventsJSON(t, f, res["events"].([]any))
			}},
		{name: "streams tail", args: []string{"streams", "tail", f.stream, "--store", f.url}},
		{name: "streams tail json", args: []string{"streams", "tail", f.stream, "--store", f.url, "--json"}},
		{name: "all tail", args: []string{"all", "tail", "--after", "start", "--no-follow", "--store", f.url}},
		{name: "all tail system", args: []string{"all", "tail", "--after", "start", "--no-follow", "--system", "--store", f.url}},
		{name: "all tail json", args: []string{"all", "tail", "--after", "start", "--no-follow", "--json", "--store", f.url}},
		{name: "subs ls", args: []string{"subs", "ls", "--store", f.url}, lines: 5},
		{name: "subs ls csv", args: []string{"subs", "ls", "--store", f.url, "--csv"}, csv: true},
		{name: "subs ls max-lag", args: []string{"subs", "ls", "--store", f.url, "--max-lag", "0", "--max-parked", "0"}, code: exitFailed, lines: 5, errLines: 4},
		{name: "subs ls json", args: []string{"subs", "ls", "--store", f.url, "--json=" + jsonFile},
			json: func(t *testing.T, r result) {
				var names []string
				for _, c := range r.doc.([]any) {
					names = append(names, c.(map[string]any)["name"].(string))
				}
				if !strings.Contains(strings.Join(names, "\x00"), f.checkpoint) {
					t.Errorf("names %q lack %q", names, f.checkpoint)
				}
			}},
		{name: "parked list", args: append([]string{"parked", "list"}, parked...), lines: 3},
		{name: "parked list csv", args: append([]string{"parked", "list", "--csv"}, parked...), csv: true},
		{name: "parked list json", args: append([]string{"parked", "list", "--json=" + jsonFile}, parked...),
			json: func(t *testing.T, r result) {
				pe := r.doc.([]any)[0].(map[string]any)
				want := f.parked[0]
				if pe["stream"] != want.Stream || pe["type"] != want.Type || pe["reason"] != want.Reason || pe["error"] != want.Error {
					t.Errorf("parked %v, want %+v", pe, want)
				}
			}},
		{name: "parked replay to a hostile webhook", args: append([]string{"parked", "replay", "--webhook", hook.URL, "--secret", "k"}, parked...), code: exitFailed, lines: 2, errLines: 1},
		{name: "projections list", args: []string{"projections", "list", "--store", f.url}, lines: 3},
		{name: "projections list csv", args: []string{"projections", "list", "--store", f.url, "--csv"}, csv: true},
		{name: "projections status", args: []string{"projections", "status", f.projection, "--store", f.url}},
		{name: "projections status json", args: []string{"projections", "status", f.projection, "--store", f.url, "--json=" + jsonFile},
			json: func(t *testing.T, r result) {
				res := r.env
				if res["name"] != f.projection || res["failure"].(map[string]any)["error"] != f.failure {
					t.Errorf("status %v, want name %q, failure %q", res, f.projection, f.failure)
				}
			}},
		{name: "projections pause", args: []string{"projections", "pause", f.projection, "--store", f.url}},
		{name: "retention set", args: []string{"retention", "set", "--stream", f.stream, "--max-count", "1", "--store", f.url}, lines: 1},
		{name: "retention run", args: []string{"retention", "run", "--store", f.url}, lines: 3},
		{name: "retention list", args: []string{"retention", "list", "--store", f.url}, lines: 4},
		{name: "retention list csv", args: []string{"retention", "list", "--store", f.url, "--csv"}, csv: true},
		{name: "retention list json", args: []string{"retention", "list", "--store", f.url, "--json=" + jsonFile},
			json: func(t *testing.T, r result) {
				p := r.env["policies"].([]any)[0].(map[string]any)
				tr := r.env["last_report"].(map[string]any)["truncations"].([]any)[0].(map[string]any)
				if p["stream"] != f.stream || tr["stream"] != f.stream {
					t.Errorf("policy %v, truncation %v, want stream %q", p, tr, f.stream)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runIn(t, c.args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, c.code, r.stdout, r.stderr)
			}
			checkTerminalSafe(t, "stdout", r.stdout)
			checkTerminalSafe(t, "stderr", r.stderr)
			if c.lines > 0 {
				if got := strings.Count(r.stdout, "\n"); got != c.lines {
					t.Errorf("%d lines, want %d: a value broke the table:\n%s", got, c.lines, r.stdout)
				}
			}
			if got := strings.Count(r.stderr, "\n"); c.errLines > 0 && got != c.errLines {
				t.Errorf("stderr has %d lines, want %d:\n%s", got, c.errLines, r.stderr)
			}
			if c.csv {
				recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
				if err != nil || len(recs) < 2 {
					t.Fatalf("CSV: %v, %d records\n%s", err, len(recs), r.stdout)
				}
				for _, rec := range recs {
					for _, field := range rec {
						if strings.ContainsAny(field, "\r\n") {
							t.Errorf("a CSV field spans lines: %q", field)
						}
					}
				}
			}
			if c.json != nil {
				b, err := readFile(jsonFile)
				if err != nil {
					t.Fatal(err)
				}
				checkTerminalSafe(t, "json", b)
				c.json(t, r)
			}
			if strings.Contains(strings.Join(c.args, " "), "--json") && !strings.Contains(strings.Join(c.args, " "), "--json=") {
				var evs []any
				for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
					var e any
					if err := json.Unmarshal([]byte(line), &e); err != nil {
						t.Fatalf("a JSON line %q: %v", line, err)
					}
					if e.(map[string]any)["stream"] == f.stream {
						evs = append(evs, e)
					}
				}
				checkEventsJSON(t, f, evs)
			}
		})
	}
}

// checkEventsJSON: the events of the hostile stream, as --json prints
// them, are exactly the stored ones.
func checkEventsJSON(t *testing.T, f hostileFixture, evs []any) {
	t.Helper()
	if len(evs) != 2 {
		t.Fatalf("%d events of the hostile stream, want 2", len(evs))
	}
	first, second := evs[0].(map[string]any), evs[1].(map[string]any)
	if first["stream"] != f.stream || first["type"] != "T"+hostile {
		t.Errorf("event 1: stream %q type %q", first["stream"], first["type"])
	}
	if got, _ := json.Marshal(f.binary); first["data_base64"] != strings.Trim(string(got), `"`) {
		t.Errorf("event 1 data %v, want the bytes %q", first["data_base64"], f.binary)
	}
	var want any
	_ = json.Unmarshal(f.jsonData, &want)
	if !reflect.DeepEqual(second["data"], want) {
		t.Errorf("event 2 data %#v, want %#v", second["data"], want)
	}
}

func readFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	return string(b), err
}

// TestErrorText: an error reaches stderr escaped, on one line, unless
// errors.Join joined several.
func TestErrorText(t *testing.T) {
	evil := errors.New("webhook: 400: " + hostile)
	for _, c := range []struct {
		name  string
		err   error
		lines int
	}{
		{"plain", errors.New("no such store"), 1},
		{"hostile", fmt.Errorf("replay: %w", evil), 1},
		{"joined", errors.Join(evil, errors.New("close: broken pipe")), 2},
		{"joined in an exit error", &exitError{code: exitFailed, err: errors.Join(evil, evil, evil)}, 3},
		{"a join wrapped", fmt.Errorf("cleanup: %w", errors.Join(evil, evil)), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := errorText(c.err)
			checkTerminalSafe(t, "error", got)
			if n := strings.Count(got, "\n") + 1; n != c.lines {
				t.Errorf("%d lines, want %d:\n%s", n, c.lines, got)
			}
		})
	}
}
