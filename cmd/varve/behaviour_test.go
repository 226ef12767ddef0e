package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/internal/testenv"
)

// withParam adds a query parameter to a URL.
func withParam(u, kv string) string {
	if strings.Contains(u, "?") {
		return u + "&" + kv
	}
	return u + "?" + kv
}

func schemaExists(t *testing.T, pgURL, schema string) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func natsStream(t *testing.T, natsURL, name string) (bool, jetstream.JetStream, func()) {
	t.Helper()
	nc, err := natsgo.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = js.Stream(context.Background(), name)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal(err)
	}
	return err == nil, js, nc.Close
}

// TestParkedCreatesNothing: parked on a store or subscription that does
// not exist says so, exits 1, and leaves no file, schema or stream behind.
func TestParkedCreatesNothing(t *testing.T) {
	pgURL, natsURL := testenv.PostgresURL(t), testenv.NATSURL(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "none.db")
	schema := lab.NewRunID("parked")
	stream := strings.ToUpper(lab.NewRunID("parked"))
	existing := parkedStore(t, t.TempDir())
	path := strings.TrimPrefix(existing, "sqlite://")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, store, sub, want string
		gone                   func() bool
	}{
		{"sqlite file", "sqlite://" + file, "hooks", "no such store", func() bool { _, err := os.Stat(file); return os.IsNotExist(err) }},
		{"postgres schema", withParam(pgURL, "varve_schema="+schema), "hooks", "no such store", func() bool { return !schemaExists(t, pgURL, schema) }},
		{"nats stream", withParam(natsURL, "stream="+stream+"&prefix="+strings.ToLower(stream)), "hooks", "no such store", func() bool {
			ok, _, done := natsStream(t, natsURL, stream)
			done()
			return !ok
		}},
		{"unknown subscription", existing, "nobody", "unknown subscription", func() bool {
			after, err := os.ReadFile(path)
			return err == nil && string(after) == string(before)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range [][]string{{"parked", "list"}, {"parked", "skip", "--all"}} {
				r := runIn(t, append(cmd, "--store", tc.store, "--subscription", tc.sub)...)
				if r.code != exitFailed || !strings.Contains(r.stderr, tc.want) {
					t.Fatalf("varve %s: exit %d, stderr %q; want 1 and %q", strings.Join(cmd, " "), r.code, r.stderr, tc.want)
				}
				if !tc.gone() {
					t.Fatalf("varve %s created something", strings.Join(cmd, " "))
				}
			}
		})
	}
}

// TestServerNamespaces: a run on PostgreSQL or NATS writes into a schema or
// stream of its own, dropped after the run unless --keep.
func TestServerNamespaces(t *testing.T) {
	pgURL, natsURL := testenv.PostgresURL(t), testenv.NATSURL(t)
	for _, tc := range []struct {
		name, store string
		exists      func(ns string) bool
		drop        func(ns string)
	}{
		{"postgres", pgURL, func(ns string) bool { return schemaExists(t, pgURL, ns) }, func(ns string) {
			conn, err := pgx.Connect(context.Background(), pgURL)
			if err == nil {
				_, _ = conn.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+ns+`" CASCADE`)
				conn.Close(context.Background())
			}
		}},
		{"nats", natsURL, func(ns string) bool {
			ok, _, done := natsStream(t, natsURL, ns)
			done()
			return ok
		}, func(ns string) {
			_, js, done := natsStream(t, natsURL, ns)
			defer done()
			_ = js.DeleteStream(context.Background(), ns)
			_ = js.DeleteKeyValue(context.Background(), ns+"_snapshots")
			_ = js.DeleteKeyValue(context.Background(), ns+"_checkpoints")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, keep := range []bool{false, true} {
				out := filepath.Join(t.TempDir(), "out.json")
				args := []string{"loadtest", "--store", tc.store, "-n", "20", "-u", "2", "-b", "10", "--json=" + out}
				if keep {
					args = append(args, "--keep")
				}
				r := runIn(t, args...)
				if r.code != exitOK {
					t.Fatalf("exit %d\n%s", r.code, r.stderr)
				}
				st := r.env["stores"].([]any)[0].(map[string]any)
				ns, _ := st["namespace"].(string)
				if !strings.HasPrefix(strings.ToLower(ns), "varve_loadtest_") || (st["kept"] == true) != keep {
					t.Fatalf("store %v: want a namespace of the run, kept %v", st, keep)
				}
				if !strings.Contains(r.stderr, "this run writes into") {
					t.Fatalf("the run did not say where it writes:\n%s", r.stderr)
				}
				if got := tc.exists(ns); got != keep {
					t.Fatalf("keep %v: %s exists after the run: %v", keep, ns, got)
				}
				if keep {
					tc.drop(ns)
				}
			}
		})
	}
}

// TestChecks: a check that holds exits 0, one that misses exits 1 and
// says which row missed it, a bad check is a usage error.
func TestChecks(t *testing.T) {
	base := []string{"matrix", "--store", "memory", "--streams", "20", "--workers", "1,2", "--mix", "50/50", "--duration", "20ms"}
	for _, tc := range []struct {
		checks []string
		code   int
		stderr string
	}{
		{[]string{"errors==0", "p50<1m", "ratio>0"}, exitOK, "check ratio>0: ok"},
		{[]string{"errors==0", "p99<1ns"}, exitFailed, "check p99<1ns: FAILED"},
		{[]string{"rate>1e12"}, exitFailed, "50/50 reads, 1 worker: rate is"},
		{[]string{"p99<5"}, exitUsage, "give a duration with its unit"},
		{[]string{"speed>1"}, exitUsage, `unknown metric "speed"`},
	} {
		args := append([]string{}, base...)
		for _, c := range tc.checks {
			args = append(args, "--check", c)
		}
		out := filepath.Join(t.TempDir(), "out.json")
		r := runIn(t, append(args, "--json="+out)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("checks %v: exit %d, stderr:\n%s\nwant exit %d and %q", tc.checks, r.code, r.stderr, tc.code, tc.stderr)
			continue
		}
		if tc.code != exitUsage && len(r.env["checks"].([]any)) != len(tc.checks) {
			t.Errorf("checks %v: envelope %v", tc.checks, r.env["checks"])
		}
	}
}

// TestHelp: every command's help lists the store forms and the exit codes,
// speaks no internal jargon, and shows list defaults as they are typed.
func TestHelp(t *testing.T) {
	for _, cmd := range []string{"bench", "loadtest", "deliver-bench", "matrix", "soak"} {
		r := runIn(t, cmd, "--help")
		for _, want := range []string{"sqlite          the embedded SQLite store", "{tmp}", "--keep", "--check", "--csv", "--json", "-d, --duration", "-r, --rate", "130 interrupted"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s --help lacks %q", cmd, want)
			}
		}
		for _, bad := range []string{"seed 0", "issue ", "txn/s", "[10.000000"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("%s --help says %q", cmd, bad)
			}
		}
	}
	if r := runIn(t, "deliver-bench", "--help"); !strings.Contains(r.stdout, "(default 10,50)") || !strings.Contains(r.stdout, "-w, --workers") {
		t.Errorf("deliver-bench --help:\n%s", r.stdout)
	}
	if r := runIn(t, "matrix", "--help"); strings.Count(r.stdout, "default 10000") != 1 || strings.Contains(r.stdout, "1000000") {
		t.Errorf("matrix --help shows more than one --streams default:\n%s", r.stdout)
	}
}

// TestBenchReport: the rows, details and text of a bench run; reads get no
// ratio, and the header names only what ran.
func TestBenchReport(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.json")
	r := runIn(t, "bench", "--store", "memory", "--workload", "append-batch10", "--workload", "last-position", "--events", "200", "--json="+out)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkEnvelope(t, r, "bench")
	rows := r.env["results"].([]any)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	write, read := rows[0].(map[string]any), rows[1].(map[string]any)
	if write["name"] != "append-batch10" || write["ratio"] == nil || read["name"] != "last-position" || read["ratio"] != nil {
		t.Fatalf("rows: %v", rows)
	}
	details := r.env["details"].(map[string]any)
	if bl := details["baselines"].([]any); len(bl) != 1 {
		t.Fatalf("details: %v", details)
	}
	text := runIn(t, "bench", "--store", "memory", "--workload", "append-single", "--events", "100")
	if strings.Contains(text.stdout, "scale") || !strings.Contains(text.stdout, "ran: 1 workload (append-single)") {
		t.Fatalf("header:\n%s", text.stdout)
	}
}

// TestSIGTERM: SIGTERM stops a run like SIGINT, with its partial results.
func TestSIGTERM(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.json")
	r := signalRun(t, syscall.SIGTERM, "ops/s |", "soak", "--store", "memory", "--duration", "1m", "--interval", "100ms", "--aggregates", "10", "--json="+out)
	if r.code != exitInterrupted {
		t.Fatalf("exit %d after SIGTERM\n%s", r.code, r.stderr)
	}
	checkEnvelope(t, r, "soak")
}

// TestLoadtestCodec: --codec picks the aggregate codec, says so and
// records it; an unknown one is a usage error.
func TestLoadtestCodec(t *testing.T) {
	for _, tc := range []struct {
		codec string
		code  int
	}{{"json", exitOK}, {"gojson", exitOK}, {"xml", exitUsage}, {"", exitUsage}} {
		t.Run(tc.codec, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.json")
			r := runIn(t, "loadtest", "--store", "memory:", "-n", "40", "-u", "4", "-b", "20", "--load-after-save", "--codec", tc.codec, "--json="+out)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.stderr)
			}
			if tc.code != exitOK {
				if !strings.Contains(r.stderr, "--codec") {
					t.Fatalf("the error does not name the flag: %s", r.stderr)
				}
				return
			}
			if !strings.Contains(r.stdout+r.stderr, "Codec:           "+tc.codec) {
				t.Fatalf("the run does not say its codec:\n%s%s", r.stdout, r.stderr)
			}
			if got := r.env["config"].(map[string]any)["codec"]; got != tc.codec {
				t.Fatalf("the envelope's config.codec is %v", got)
			}
		})
	}
}
