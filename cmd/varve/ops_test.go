package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
)

// opsStore makes a SQLite store with streams, a system stream, checkpoints
// and parked events (subscription "hooks", as parkedStore makes them) and
// returns its URL.
func opsStore(t *testing.T) string {
	t.Helper()
	url := parkedStore(t, t.TempDir())
	ctx := context.Background()
	store, err := open.Store(ctx, url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for i, s := range []string{"order-1", "order-2", "user-1"} {
		evs := make([]varve.Event, i+1)
		for j := range evs {
			evs[j] = varve.NewEvent("Placed", fmt.Appendf(nil, `{"n":%d,"nested":{"ok":true}}`, j))
		}
		if _, err := store.Append(ctx, s, varve.NoStream, evs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Checkpoints().Save(ctx, "projector", varve.Position{Seq: 2}); err != nil {
		t.Fatal(err)
	}
	if err := store.Checkpoints().Save(ctx, "hooks", varve.Start); err != nil {
		t.Fatal(err)
	}
	return url
}

// TestOperatorCommands: streams ls, show and tail, all tail and subs ls
// print what the store holds; subs reset asks, and moves the checkpoint
// only when confirmed.
func TestOperatorCommands(t *testing.T) {
	store := opsStore(t)
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "out.json")

	r := runIn(t, "streams", "ls", "--store", store, "--prefix", "order-", "--json="+jsonFile)
	if r.code != exitOK {
		t.Fatalf("streams ls: exit %d\n%s", r.code, r.stderr)
	}
	res, _ := r.env["streams"].([]any)
	if len(res) != 2 || res[0].(map[string]any)["stream"] != "order-1" || res[1].(map[string]any)["version"] != 2.0 {
		t.Fatalf("streams ls results: %v", res)
	}

	r = runIn(t, "streams", "ls", "--store", store, "--limit", "2")
	if r.code != exitOK || !strings.Contains(r.stdout, "STREAM") || !strings.Contains(r.stdout, `more follow: --after "b"`) || strings.Contains(r.stdout, "$parked") {
		t.Fatalf("streams ls --limit 2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runIn(t, "streams", "ls", "--store", store, "--all", "--system", "--limit", "1")
	for _, want := range []string{"$parked-hooks", "order-1", "order-2", "user-1", "a ", "b ", "6 streams"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("streams ls --all --system lacks %q:\n%s", want, r.stdout)
		}
	}

	r = runIn(t, "streams", "show", "order-2", "--store", store)
	for _, want := range []string{"stream order-2: version 2", "order-2@1  Placed", "order-2@2", `"nested": {`, "2 events"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("streams show lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := runIn(t, "streams", "show", "nope", "--store", store); r.code != exitFailed || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("streams show of a missing stream: exit %d %s", r.code, r.stderr)
	}

	r = runIn(t, "streams", "tail", "user-1", "-n", "2", "--json", "--store", store)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != exitOK || len(lines) != 2 || !strings.Contains(lines[0], `"version":2`) || !strings.Contains(lines[1], `"version":3`) {
		t.Fatalf("streams tail -n 2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = runIn(t, "all", "tail", "--after", "start", "--no-follow", "--json", "--store", store)
	var last varve.Position
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e struct {
			Stream   string         `json:"stream"`
			Position varve.Position `json:"position"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("all tail --json line %q: %v", line, err)
		}
		if !last.Less(e.Position) || strings.HasPrefix(e.Stream, "$") {
			t.Fatalf("all tail: %s at %s after %s", e.Stream, e.Position, last)
		}
		last, n = e.Position, n+1
	}
	if r.code != exitOK || n != 9 { // 3 parked events' streams + 1+2+3
		t.Fatalf("all tail printed %d events (exit %d)\n%s", n, r.code, r.stderr)
	}
	if r := runIn(t, "all", "tail", "--after", "start", "--count", "2", "--store", store); r.code != exitOK || strings.Count(r.stdout, "position ") != 2 {
		t.Fatalf("all tail --count 2: exit %d\n%s", r.code, r.stdout)
	}
	// Newest first: the same events in reverse, from the end or before a
	// position, then filtered.
	backward := func(args ...string) []string {
		t.Helper()
		r := runIn(t, append([]string{"all", "tail", "--backward", "--json", "--store", store}, args...)...)
		if r.code != exitOK {
			t.Fatalf("all tail --backward %v: exit %d\n%s", args, r.code, r.stderr)
		}
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var e struct {
				Position varve.Position `json:"position"`
			}
			if line != "" && json.Unmarshal([]byte(line), &e) == nil {
				out = append(out, e.Position.String())
			}
		}
		return out
	}
	if got := backward(); len(got) != 9 || got[0] != last.String() {
		t.Fatalf("all tail --backward: %v, want 9 events from %s down", got, last)
	}
	if got := backward("--before", last.String(), "--count", "2"); len(got) != 2 || got[0] == last.String() {
		t.Fatalf("all tail --backward --before %s --count 2: %v", last, got)
	}
	if got := backward("--category", "order"); len(got) != 3 {
		t.Fatalf("all tail --backward --category order: %v, want 3 events", got)
	}
	for _, bad := range [][]string{{"--backward", "--after", "start"}, {"--before", "3"}, {"--backward", "--before", "start"}} {
		if r := runIn(t, append([]string{"all", "tail", "--store", store}, bad...)...); r.code != exitUsage {
			t.Fatalf("all tail %v: exit %d, want a usage error\n%s", bad, r.code, r.stderr)
		}
	}
	// The store's filter: a category, and a stream prefix with a type.
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--category", "order"}, 3},
		{[]string{"--stream-prefix", "user-", "--type", "Placed,Nope"}, 3},
		{[]string{"--type", "Nope"}, 0},
		{[]string{"--category", "order,user", "--category", "nope"}, 6},
	} {
		args := append([]string{"all", "tail", "--after", "start", "--no-follow", "--json", "--store", store}, tc.args...)
		r := runIn(t, args...)
		got := 0
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if line != "" {
				got++
			}
		}
		if r.code != exitOK || got != tc.want {
			t.Fatalf("all tail %v: exit %d, %d events, want %d\n%s%s", tc.args, r.code, got, tc.want, r.stdout, r.stderr)
		}
	}

	r = runIn(t, "subs", "ls", "--store", store, "--json="+jsonFile, "--max-lag", "100")
	if r.code != exitOK {
		t.Fatalf("subs ls --max-lag 100: exit %d\n%s", r.code, r.stderr)
	}
	subs := map[string]map[string]any{}
	for _, s := range r.doc.([]any) {
		subs[s.(map[string]any)["name"].(string)] = s.(map[string]any)
	}
	if h, p := subs["hooks"], subs["projector"]; h == nil || p == nil || h["parked"] != 3.0 || h["lag"] != 9.0 || p["lag"] != 7.0 || p["checkpoint"] != "2" {
		t.Fatalf("subs ls: %v", subs)
	}
	if r := runIn(t, "subs", "ls", "--store", store, "--max-lag", "5"); r.code != exitFailed || !strings.Contains(r.stderr, "over --max-lag 5") {
		t.Fatalf("subs ls --max-lag 5 passed: exit %d\n%s", r.code, r.stderr)
	}
	r = runIn(t, "subs", "ls", "--store", store)
	for _, want := range []string{"NAME", "hooks", "behind", "projector", "$all ends at 12"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("subs ls lacks %q:\n%s", want, r.stdout)
		}
	}

	checkpoint := func() varve.Position {
		s, err := open.Existing(context.Background(), store, varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		p, _, err := s.Checkpoints().Load(context.Background(), "projector")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	confirmIn = strings.NewReader("no\n")
	r = runIn(t, "subs", "reset", "projector", "--to", "end", "--store", store)
	if r.code != exitFailed || !strings.Contains(r.stderr, "Type the name to confirm") || checkpoint() != (varve.Position{Seq: 2}) {
		t.Fatalf("an unconfirmed reset: exit %d, checkpoint %s\n%s", r.code, checkpoint(), r.stderr)
	}
	confirmIn = strings.NewReader("projector\n")
	r = runIn(t, "subs", "reset", "projector", "--to", "end", "--store", store)
	if r.code != exitOK || checkpoint() != (varve.Position{Seq: 12}) || !strings.Contains(r.stdout, "2 -> 12") {
		t.Fatalf("a confirmed reset: exit %d, checkpoint %s\n%s%s", r.code, checkpoint(), r.stdout, r.stderr)
	}
	confirmIn = os.Stdin
	if r := runIn(t, "subs", "reset", "projector", "--to", "start", "--yes", "--store", store); r.code != exitOK || checkpoint() != varve.Start {
		t.Fatalf("reset --yes: exit %d, checkpoint %s\n%s", r.code, checkpoint(), r.stderr)
	}
	if r := runIn(t, "subs", "reset", "nobody", "--to", "start", "--yes", "--store", store); r.code != exitFailed || !strings.Contains(r.stderr, "unknown subscription") {
		t.Fatalf("reset of an unknown consumer: exit %d\n%s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"streams", "ls"},
		{"streams", "ls", "--store", "sqlite"},
		{"streams", "ls", "--store", store, "--limit", "0"},
		{"streams", "show", "--store", store},
		{"streams", "tail", "x", "--store", store, "-n", "-1"},
		{"all", "tail", "--store", store, "--after", "twelve"},
		{"subs", "reset", "projector", "--store", store},
		{"subs", "reset", "projector", "--to", "99999", "--yes", "--store", store},
		{"subs", "reset", "projector", "--to", "soon", "--yes", "--store", store},
		{"subs", "ls", "--store", "nosuch://x"},
	} {
		if r := runIn(t, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
	if r := runIn(t, "streams", "ls", "--store", "sqlite:///nonexistent/dir/x.db"); r.code != exitFailed || !strings.Contains(r.stderr, "no such store") {
		t.Errorf("streams ls of a missing store: exit %d\n%s", r.code, r.stderr)
	}
}

// TestHelpGroups: varve --help lists the operator commands apart from the
// lab's.
func TestHelpGroups(t *testing.T) {
	r := runIn(t, "--help")
	lab := strings.Index(r.stdout, "Lab commands")
	ops := strings.Index(r.stdout, "Operator commands")
	if lab < 0 || ops < 0 {
		t.Fatalf("no command groups:\n%s", r.stdout)
	}
	section := func(start int) string {
		s := r.stdout[start:]
		if i := strings.Index(s, "\n\n"); i >= 0 {
			s = s[:i]
		}
		return s
	}
	for _, c := range []string{"serve", "streams", "subs", "all", "parked", "erase", "erasures", "keys"} {
		if !strings.Contains(section(ops), "\n  "+c+" ") {
			t.Errorf("%s is not among the operator commands:\n%s", c, section(ops))
		}
	}
	for _, c := range []string{"bench", "loadtest", "deliver-bench", "matrix", "soak"} {
		if !strings.Contains(section(lab), "\n  "+c+" ") {
			t.Errorf("%s is not among the lab commands:\n%s", c, section(lab))
		}
	}
}

// TestServe starts varve serve on a new SQLite file with the token from
// the environment, checks the API and the console, stops it with the
// interrupt, and checks that the token was never printed.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	const tok = "serve-test-token-abcdef0123"
	t.Setenv(tokenEnv, tok)
	addr := make(chan string, 1)
	listening = func(a string) { addr <- a }
	defer func() { listening = func(string) {} }()
	ctx, cancel := context.WithCancelCause(context.Background())
	var out, errOut syncBuf
	done := make(chan int, 1)
	go func() { done <- execute(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--writes"}, &out, &errOut) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case code := <-done:
		t.Fatalf("serve exited %d:\n%s", code, errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		return res.StatusCode, b.String()
	}
	if code, _ := get("/api/v1/health", ""); code != 200 {
		t.Fatalf("health: %d", code)
	}
	if code, _ := get("/api/v1/info", ""); code != 401 {
		t.Fatalf("info without the token: %d", code)
	}
	code, body := get("/api/v1/info", tok)
	if code != 200 || !strings.Contains(body, `"backend":"sqlite"`) || !strings.Contains(body, `"writes":true`) {
		t.Fatalf("info: %d %s", code, body)
	}
	if code, body := get("/", ""); code != 200 || !strings.Contains(body, "varve console") {
		t.Fatalf("console: %d", code)
	}
	// The dashboard measures the appends made through serve's store.
	if code, body := get("/api/v1/dashboard", tok); code != 200 || !strings.Contains(body, `"measured":true`) || !strings.Contains(body, `"sampling":true`) {
		t.Fatalf("dashboard: %d %s", code, body)
	}
	cancel(errInterrupted)
	select {
	case code := <-done:
		if code != exitInterrupted {
			t.Fatalf("serve exited %d after the interrupt:\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "varve.db")); err != nil {
		t.Fatalf("serve made no store in the current directory: %v", err)
	}
	logs := errOut.String() + out.String()
	if strings.Contains(logs, tok) {
		t.Fatalf("the token was printed:\n%s", logs)
	}
	for _, want := range []string{"created the store", "the console is at", "status=401", "stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("serve's output lacks %q:\n%s", want, logs)
		}
	}
}

// TestServeToken: a token file is read and a weak token refused; without
// one, serve makes a token in a file of its own and names the file.
func TestServeToken(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(tokenEnv, "")
	weak := filepath.Join(dir, "weak")
	if err := os.WriteFile(weak, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--store", "memory:", "--token-file", weak},
		{"serve", "--store", "memory:", "--token-file", filepath.Join(dir, "missing")},
		{"serve", "--store", "memory:", "--listen", "0.0.0.0:0"},
		{"serve", "--store", "memory:", "--listen", "nonsense"},
		{"serve", "--store", "memory:", "--tls-cert", "x"},
		{"serve", "--store", "memory:", "--replay-webhook", "nohook"},
	} {
		if r := runIn(t, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
	sf := serveFlags{}
	var errOut bytes.Buffer
	tok, cleanup, err := sf.token(&errOut)
	if err != nil {
		t.Fatal(err)
	}
	file := strings.Fields(strings.SplitAfter(errOut.String(), "token is in ")[1])[0]
	b, err := os.ReadFile(file)
	if err != nil || strings.TrimSpace(string(b)) != tok || strings.Contains(errOut.String(), tok) {
		t.Fatalf("generated token: %v, file %q, stderr %q", err, b, errOut.String())
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v", fi.Mode().Perm())
	}
	cleanup()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the token file outlives serve: %v", err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("a-long-enough-token-0123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sf.tokenFile = good
	errOut.Reset()
	if tok, _, err := sf.token(&errOut); err != nil || tok != "a-long-enough-token-0123456789" || !strings.Contains(errOut.String(), "readable by others") {
		t.Fatalf("token file: %q %v %q", tok, err, errOut.String())
	}
}

// syncBuf is a buffer written by serve's goroutine and read by the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestShowByBytes: streams show stops its page after the event that takes
// it to --max-bytes (at least one event) and names the next page; JSON
// gives "next"; streams tail -n holds the same budget.
func TestShowByBytes(t *testing.T) {
	store := opsStore(t)
	ctx := context.Background()
	s, err := open.Store(ctx, store, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := s.Append(ctx, "big-1", varve.Any, varve.NewEvent("Blob", fmt.Appendf(nil, `{"b":%q}`, strings.Repeat("x", 1000)))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	jsonFile := filepath.Join(t.TempDir(), "out.json")
	for _, tc := range []struct {
		args []string
		want string
		next float64
	}{
		{[]string{"--max-bytes", "2500"}, "3 events (--max-bytes reached: the next page is --from 4)", 4},
		{[]string{"--max-bytes", "1"}, "1 events (--max-bytes reached: the next page is --from 2)", 2},
		{[]string{"--max-bytes", "1", "--backward"}, "1 events (--max-bytes reached: the next page is --from 4)", 4},
		{[]string{"--max-bytes", "100000"}, "5 events\n", 0},
		{[]string{"--max-bytes", "3000", "--limit", "3"}, "3 events\n", 0},
	} {
		args := append([]string{"streams", "show", "big-1", "--store", store}, tc.args...)
		if r := runIn(t, args...); r.code != exitOK || !strings.Contains(r.stdout, tc.want) {
			t.Fatalf("%v: exit %d, want %q:\n%s%s", tc.args, r.code, tc.want, r.stdout, r.stderr)
		}
		r := runIn(t, append(args, "--json="+jsonFile)...)
		if r.code != exitOK {
			t.Fatalf("%v --json: exit %d %s", tc.args, r.code, r.stderr)
		}
		if next, _ := r.env["next"].(float64); next != tc.next {
			t.Fatalf("%v --json: next %v, want %v", tc.args, r.env["next"], tc.next)
		}
	}
	if r := runIn(t, "streams", "show", "big-1", "--store", store, "--max-bytes", "0"); r.code != exitUsage {
		t.Fatalf("--max-bytes 0: exit %d", r.code)
	}
}
