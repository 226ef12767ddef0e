package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// commandSpec is how the acceptance test drives one command.
type commandSpec struct {
	name string
	// args are a tiny run of the command, without --store.
	args func(t *testing.T) []string
	// zero sets a count to 0, which the command refuses.
	zero []string
	// long is a run that lasts long enough to be interrupted once stderr
	// shows ready ("" waits a second).
	long  func(t *testing.T) []string
	ready string
	// memory and tmp are the exit codes on memory: and on a {tmp} SQLite
	// URL; def without --store.
	def, memory, tmp int
	// failing are the arguments of a run on a store that fails: it cannot
	// be reached, or refuses the run's writes.
	failing func(t *testing.T) []string
	// ops marks an operator command: its --json is plain JSON, written
	// only when it succeeds.
	ops bool
}

// fullSQLite is a SQLite store of 11 pages, as large as its own tables: it
// opens, and the writes fail with "database or disk is full" as soon as
// the free room in those pages is used up.
const fullSQLite = "sqlite://{tmp}/full.db?max_size=45056"

func labSpecs() []commandSpec {
	fixed := func(args ...string) func(*testing.T) []string { return func(*testing.T) []string { return args } }
	full := func(more ...string) func(*testing.T) []string {
		return func(*testing.T) []string { return append(more, "--store", fullSQLite) }
	}
	return []commandSpec{
		{
			name: "bench", args: fixed("bench", "--workload", "append-single", "--workload", "load-10", "--events", "60", "--duration", "2s"),
			zero: []string{"--events", "0"},
			long: fixed("bench", "--store", "memory", "--workload", "append-single", "--events", "100000000", "--duration", "0"), ready: "baseline warm-up",
			failing: full(),
		},
		{
			name: "loadtest", args: fixed("loadtest", "-n", "40", "-u", "5", "-b", "20"),
			zero: []string{"--workers", "0"},
			long: fixed("loadtest", "--store", "memory", "-n", "0", "--duration", "1m", "-b", "100000"), ready: "Starting Load Test",
			failing: full("-n", "400"),
		},
		{
			name: "deliver-bench", args: fixed("deliver-bench", "-t", "6", "-e", "2", "--streams", "3", "-l", "1", "-w", "1,2"),
			zero:    []string{"--workers", "0"},
			long:    fixed("deliver-bench", "--store", "memory", "-t", "200", "-e", "1", "--streams", "5", "-l", "500", "-w", "1"),
			failing: full("-t", "200"),
		},
		{
			name: "matrix", args: fixed("matrix", "--streams", "20", "--workers", "1,2", "--mix", "50/50", "--duration", "20ms"),
			zero:    []string{"--streams", "0"},
			long:    fixed("matrix", "--store", "memory", "--streams", "50", "--workers", "1", "--mix", "50/50", "--duration", "1m"),
			failing: full("--duration", "400ms"),
		},
		{
			name: "soak", args: fixed("soak", "--duration", "300ms", "--interval", "50ms", "--aggregates", "10"),
			zero: []string{"--workers", "0"},
			long: fixed("soak", "--store", "memory", "--duration", "1m", "--interval", "100ms", "--aggregates", "10"), ready: "ops/s |",
			failing: full(),
		},
	}
}

func parkedSpecs(hook string) []commandSpec {
	sub := []string{"--subscription", "hooks"}
	with := func(args ...string) func(*testing.T) []string {
		return func(*testing.T) []string { return append(args, sub...) }
	}
	hang := func(cmd ...string) func(*testing.T) []string {
		return func(t *testing.T) []string {
			return append(append(cmd, sub...), "--store", "postgres://postgres@"+blackHole(t)+"/test")
		}
	}
	refused := func(t *testing.T) []string {
		return []string{"--store", "postgres://postgres@" + refusedAddr(t) + "/test"}
	}
	// parked needs an existing store: without --store, and on a temporary
	// file, it is a usage error; memory: is empty, so the subscription is
	// unknown.
	return []commandSpec{
		{name: "parked list", args: with("parked", "list"), zero: []string{"--position", "0"}, long: hang("parked", "list"),
			def: exitUsage, memory: exitFailed, tmp: exitUsage, failing: refused, ops: true},
		{name: "parked replay", args: with("parked", "replay", "--webhook", hook, "--secret", "k"), zero: []string{"--timeout", "0"},
			long: hang("parked", "replay", "--webhook", hook, "--secret", "k"), def: exitUsage, memory: exitFailed, tmp: exitUsage, failing: refused, ops: true},
		{name: "parked skip", args: with("parked", "skip", "--all"), zero: []string{"--position", "0"},
			long: hang("parked", "skip", "--all"), def: exitUsage, memory: exitFailed, tmp: exitUsage, failing: refused, ops: true},
	}
}

// TestCommands runs every command with the default store, memory:, a
// {tmp} SQLite URL, a bad flag, a zero, an interrupt and a failing store,
// and checks the exit code and the JSON: a lab command's envelope, an
// operator command's plain JSON when it succeeds and none when it fails
// or is interrupted.
func TestCommands(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer hook.Close()
	specs := append(labSpecs(), parkedSpecs(hook.URL)...)
	for _, spec := range specs {
		t.Run(spec.name, func(t *testing.T) {
			cases := []struct {
				name  string
				extra func(t *testing.T) []string
				want  int
			}{
				{"default store", func(*testing.T) []string { return nil }, spec.def},
				{"memory", func(*testing.T) []string { return []string{"--store", "memory:"} }, spec.memory},
				{"tmp sqlite", func(*testing.T) []string { return []string{"--store", "sqlite://{tmp}/cli.db"} }, spec.tmp},
				{"bad flag", func(*testing.T) []string { return []string{"--no-such-flag"} }, exitUsage},
				{"zero", func(*testing.T) []string { return spec.zero }, exitUsage},
				{"failing store", spec.failing, exitFailed},
			}
			if strings.HasPrefix(spec.name, "parked") {
				cases = append(cases, struct {
					name  string
					extra func(t *testing.T) []string
					want  int
				}{"existing store", func(t *testing.T) []string { return []string{"--store", parkedStore(t, t.TempDir())} }, exitOK})
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					out := filepath.Join(t.TempDir(), "out.json")
					args := append(append(spec.args(t), tc.extra(t)...), "--json="+out)
					r := runIn(t, args...)
					if r.code != tc.want {
						t.Fatalf("varve %s: exit %d, want %d\nstderr: %s", strings.Join(args, " "), r.code, tc.want, r.stderr)
					}
					if r.code == exitUsage {
						if _, err := os.Stat(out); err == nil {
							t.Fatal("a usage error wrote a report")
						}
						if !strings.Contains(r.stderr, "varve:") {
							t.Fatalf("usage error without a message: %q", r.stderr)
						}
						if tc.name == "zero" && !strings.Contains(r.stderr, spec.zero[0]) {
							t.Fatalf("the error of %v does not name the flag: %q", spec.zero, r.stderr)
						}
						return
					}
					if spec.ops {
						checkOpsJSON(t, r, out)
						return
					}
					checkEnvelope(t, r, spec.name)
					if r.code == exitFailed && len(r.env["errors"].([]any)) == 0 && !rowsHaveErrors(r.env) {
						t.Fatalf("exit 1 without an error in the envelope: %v", r.env)
					}
				})
			}
			t.Run("interrupt", func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "out.json")
				r := interrupt(t, spec.ready, append(spec.long(t), "--json="+out)...)
				if r.code != exitInterrupted {
					t.Fatalf("exit %d after SIGINT, want %d\nstderr: %s", r.code, exitInterrupted, r.stderr)
				}
				if spec.ops {
					checkOpsJSON(t, r, out)
					return
				}
				checkEnvelope(t, r, spec.name)
			})
		})
	}
}

// checkOpsJSON: an operator command wrote plain JSON when it succeeded,
// and nothing but its error on stderr otherwise.
func checkOpsJSON(t *testing.T, r result, out string) {
	t.Helper()
	if r.code == exitOK {
		if r.doc == nil {
			t.Fatalf("no JSON written\nstderr: %s", r.stderr)
		}
		noEnvelope(t, r.doc)
		return
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("exit %d and a JSON file written", r.code)
	}
	if r.code == exitFailed && !strings.Contains(r.stderr, "varve:") {
		t.Fatalf("exit 1 without an error: %q", r.stderr)
	}
}

func rowsHaveErrors(env map[string]any) bool {
	rows, _ := env["results"].([]any)
	for _, row := range rows {
		if m, ok := row.(map[string]any); ok && m["errors"] != nil && m["errors"].(float64) > 0 {
			return true
		}
	}
	return false
}

// TestFlagLimits: counts over a flag's maximum are refused at once, with
// the usage exit code and an error that names the flag, instead of
// hanging or running out of memory.
func TestFlagLimits(t *testing.T) {
	for _, args := range [][]string{
		{"matrix", "--workers", "100000000"},
		{"matrix", "--streams", "100000000000"},
		{"loadtest", "--workers", "1000000"},
		{"deliver-bench", "--workers", "20000"},
		{"soak", "--workers", "100000"},
		{"bench", "--events", "100000000000000"},
	} {
		r := runIn(t, append(args, "--store", "memory:")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, args[1]) {
			t.Errorf("varve %s: exit %d, stderr %q; want %d and the flag named", strings.Join(args, " "), r.code, r.stderr, exitUsage)
		}
	}
	// --cdc-route: only with postgres-cdc, and only direct or store.
	for _, args := range [][]string{
		{"deliver-bench", "--cdc-route", "store", "--store", "memory:"},
		{"deliver-bench", "--cdc-route", "direct,sideways", "--source", "postgres-cdc", "--cdc-url", "postgres://127.0.0.1:1/x"},
	} {
		r := runIn(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--cdc-route") {
			t.Errorf("varve %s: exit %d, stderr %q; want %d and the flag named", strings.Join(args, " "), r.code, r.stderr, exitUsage)
		}
	}
}
