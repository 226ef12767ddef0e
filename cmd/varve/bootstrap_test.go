package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/internal/testenv"
	"github.com/varve-go/varve/open"
)

// newStore is a store a test may create: its URL (nothing exists there
// yet) and whether it is there.
type newStore struct {
	name, url string
	exists    func() bool
}

// newStores are a SQLite file in a new directory, a PostgreSQL schema and
// a NATS stream of their own, none of them created; each is dropped when
// the test ends.
func newStores(t *testing.T) []newStore {
	t.Helper()
	pgURL, natsURL := testenv.PostgresURL(t), testenv.NATSURL(t)
	file := filepath.Join(t.TempDir(), "new.db")
	schema := lab.NewRunID("cli")
	stream := strings.ToUpper(lab.NewRunID("cli"))
	t.Cleanup(func() {
		ctx := context.Background()
		if conn, err := pgx.Connect(ctx, pgURL); err == nil {
			_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`)
			conn.Close(ctx)
		}
		_, js, done := natsStream(t, natsURL, stream)
		defer done()
		_ = js.DeleteStream(ctx, stream)
		_ = js.DeleteKeyValue(ctx, stream+"_snapshots")
		_ = js.DeleteKeyValue(ctx, stream+"_checkpoints")
	})
	return []newStore{
		{"sqlite", "sqlite://" + filepath.ToSlash(file), func() bool { _, err := os.Stat(file); return err == nil }},
		{"postgres", withParam(pgURL, "varve_schema="+schema), func() bool { return schemaExists(t, pgURL, schema) }},
		{"nats", withParam(natsURL, "stream="+stream+"&prefix="+strings.ToLower(stream)), func() bool {
			ok, _, done := natsStream(t, natsURL, stream)
			done()
			return ok
		}},
	}
}

// createdStores are newStores, created, each with stream "s" at version
// n (no stream when n is 0).
func createdStores(t *testing.T, n int) []newStore {
	t.Helper()
	stores := newStores(t)
	for _, s := range stores {
		st, err := open.Store(context.Background(), s.url, varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := st.Append(context.Background(), "s", varve.Exact(uint64(i)), varve.NewEvent("E", []byte(`{}`))); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
	}
	return stores
}

// TestStoreURL: a bare path is a SQLite file, made absolute; URLs,
// shorthands and words are left as they are.
func TestStoreURL(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ given, want string }{
		{"demo.db", "sqlite://" + filepath.ToSlash(filepath.Join(cwd, "demo.db"))},
		{"./data/x.db", "sqlite://" + filepath.ToSlash(filepath.Join(cwd, "data/x.db"))},
		{"../x.db", "sqlite://" + filepath.ToSlash(filepath.Join(filepath.Dir(cwd), "x.db"))},
		{"data/x", "sqlite://" + filepath.ToSlash(filepath.Join(cwd, "data/x"))},
		{"/abs/x.db", "sqlite:///abs/x.db"},
		{" /abs/x.db ", "sqlite:///abs/x.db"},
		{"/abs/a b?.db", "sqlite:///abs/a%20b%3F.db"},
		{"/abs/a:b.db", "sqlite:///abs/a:b.db"},
		{"sqlite:relative.db", "sqlite:relative.db"},
		{"sqlite:///abs/x.db", "sqlite:///abs/x.db"},
		{"memory:", "memory:"},
		{"memory", "memory"},
		{"mem", "mem"},
		{"postgres", "postgres"},
		{"pg:", "pg:"},
		{"nats", "nats"},
		{"postgres://u@127.0.0.1/db.x?varve_schema=s", "postgres://u@127.0.0.1/db.x?varve_schema=s"},
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"postgress", "postgress"}, // a typo stays an unknown store
		{"odd:thing.db", "odd:thing.db"},
	} {
		got, err := storeURL(tc.given)
		if err != nil || got != tc.want {
			t.Errorf("storeURL(%q) = %q, %v; want %q", tc.given, got, err, tc.want)
		}
	}
	// The URL of a path opens that file.
	path := filepath.Join(t.TempDir(), "a b?#.db")
	u, err := storeURL(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := open.Store(context.Background(), u, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s made no file %s: %v", u, path, err)
	}
}

// TestBarePath: operator commands take a SQLite file's path for --store
// and $VARVE_STORE, relative or absolute; a path that is not there is an
// error that names varve init, and creates nothing.
func TestBarePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("data", 0o755); err != nil {
		t.Fatal(err)
	}
	made := func(path string) {
		s, err := open.Store(context.Background(), "sqlite://"+filepath.ToSlash(filepath.Join(dir, path)), varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Append(context.Background(), "in-"+filepath.Base(path), varve.NoStream, varve.NewEvent("E", nil)); err != nil {
			t.Fatal(err)
		}
	}
	made("demo.db")
	made("data/x.db")
	for _, tc := range []struct {
		store, stream string // stream: the one streams ls lists; "": none, an error
	}{
		{"demo.db", "in-demo.db"},
		{"./demo.db", "in-demo.db"},
		{"data/x.db", "in-x.db"},
		{"./data/x.db", "in-x.db"},
		{"data/../data/x.db", "in-x.db"},
		{filepath.Join(dir, "data", "x.db"), "in-x.db"},
		{"missing.db", ""},
		{"./data/missing.db", ""},
		{filepath.Join(dir, "nodir", "missing.db"), ""},
	} {
		t.Run(tc.store, func(t *testing.T) {
			for _, env := range []bool{false, true} {
				args := []string{"streams", "ls", "--json=" + filepath.Join(t.TempDir(), "out.json")}
				if env {
					t.Setenv(storeEnv, tc.store)
				} else {
					args = append(args, "--store", tc.store)
				}
				r := runIn(t, args...)
				if tc.stream == "" {
					if r.code != exitFailed || !strings.Contains(r.stderr, "no such store") || !strings.Contains(r.stderr, "varve init") {
						t.Fatalf("env %v: exit %d, stderr %q; want 1, no such store, varve init", env, r.code, r.stderr)
					}
					continue
				}
				list, _ := r.env["streams"].([]any)
				if r.code != exitOK || len(list) != 1 || list[0].(map[string]any)["stream"] != tc.stream {
					t.Fatalf("env %v: exit %d, streams %v\n%s", env, r.code, list, r.stderr)
				}
			}
		})
	}
	for _, p := range []string{"missing.db", "data/missing.db", "nodir"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("a command on a missing file made %s (%v)", p, err)
		}
	}
}

// TestVarveStore: without --store, every operator command that takes one
// uses $VARVE_STORE; an explicit --store wins; a bad $VARVE_STORE is a
// usage error that names it; the lab commands keep their own default.
func TestVarveStore(t *testing.T) {
	dir := t.TempDir()
	envStore, flagStore := filepath.Join(dir, "env.db"), filepath.Join(dir, "flag.db")
	for _, f := range []string{envStore, flagStore} {
		if r := runIn(t, "init", "--store", f); r.code != exitOK {
			t.Fatalf("init %s: exit %d\n%s", f, r.code, r.stderr)
		}
	}
	if r := runIn(t, "append", "from-env", "--type", "E", "--data", "{}", "--store", envStore); r.code != exitOK {
		t.Fatalf("append: exit %d\n%s", r.code, r.stderr)
	}
	t.Setenv(storeEnv, envStore)

	// Every operator command that takes --store reads $VARVE_STORE.
	root := rootCmd(new(bool))
	groupCommands(root)
	n := 0
	for _, leaf := range operatorLeaves(root) {
		f := leaf.Flags().Lookup("store")
		if f == nil {
			continue
		}
		n++
		if !strings.Contains(f.Usage, "$"+storeEnv) {
			t.Errorf("%s: the help of --store does not name $%s: %q", leaf.CommandPath(), storeEnv, f.Usage)
		}
		target, err := resolveExisting(leaf, f.DefValue)
		if err != nil || target.URL != "sqlite://"+filepath.ToSlash(envStore) {
			t.Errorf("%s: store %v, %v; want $%s's", leaf.CommandPath(), target, err, storeEnv)
		}
	}
	if n < 20 {
		t.Fatalf("only %d operator commands take --store", n)
	}

	ls := func(args ...string) []any {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out.json")
		r := runIn(t, append([]string{"streams", "ls", "--json=" + out}, args...)...)
		if r.code != exitOK {
			t.Fatalf("streams ls %v: exit %d\n%s", args, r.code, r.stderr)
		}
		list, _ := r.env["streams"].([]any)
		return list
	}
	if got := ls(); len(got) != 1 || got[0].(map[string]any)["stream"] != "from-env" {
		t.Fatalf("streams ls over $%s: %v", storeEnv, got)
	}
	if got := ls("--store", flagStore); len(got) != 0 {
		t.Fatalf("streams ls --store %s listed $%s's streams: %v", flagStore, storeEnv, got)
	}
	if r := runIn(t, "append", "from-env", "--type", "E", "--data", "{}", "--expected", "1"); r.code != exitOK {
		t.Fatalf("append over $%s: exit %d\n%s", storeEnv, r.code, r.stderr)
	}

	for _, bad := range []string{"nope:x", "postgres://127.0.0.1/db?varve_schema=a;b", "sqlite"} {
		t.Setenv(storeEnv, bad)
		r := runIn(t, "streams", "ls")
		if r.code != exitUsage || !strings.Contains(r.stderr, "$"+storeEnv) {
			t.Fatalf("$%s=%q: exit %d, stderr %q; want 2, naming $%s", storeEnv, bad, r.code, r.stderr, storeEnv)
		}
		if r := runIn(t, "streams", "ls", "--store", envStore); r.code != exitOK {
			t.Fatalf("--store with a bad $%s: exit %d\n%s", storeEnv, r.code, r.stderr)
		}
	}
	t.Setenv(storeEnv, "")
	if r := runIn(t, "streams", "ls"); r.code != exitUsage || !strings.Contains(r.stderr, "$"+storeEnv) {
		t.Fatalf("no store at all: exit %d, stderr %q", r.code, r.stderr)
	}

	// A lab command's default store is its own, not $VARVE_STORE's.
	t.Setenv(storeEnv, filepath.Join(dir, "absent", "lab.db"))
	out := filepath.Join(t.TempDir(), "bench.json")
	r := runIn(t, "bench", "--workload", "append-single", "--events", "20", "--duration", "2s", "--json="+out)
	if r.code != exitOK {
		t.Fatalf("bench with $%s set: exit %d\n%s", storeEnv, r.code, r.stderr)
	}
	stores, _ := r.env["stores"].([]any)
	if len(stores) != 1 || stores[0].(map[string]any)["name"] != "sqlite" {
		t.Fatalf("bench ran on %v, want its temporary sqlite", stores)
	}
	if _, err := os.Stat(filepath.Join(dir, "absent")); !os.IsNotExist(err) {
		t.Fatalf("bench used $%s", storeEnv)
	}
}

// TestInit: init creates a SQLite file (and its directory), a PostgreSQL
// schema and a NATS stream, says what it created, and on a store that is
// there changes nothing; before it, an operator command's "no such store"
// names varve init.
func TestInit(t *testing.T) {
	for _, s := range newStores(t) {
		t.Run(s.name, func(t *testing.T) {
			url := s.url
			if s.name == "sqlite" {
				url = filepath.Join(filepath.Dir(strings.TrimPrefix(s.url, "sqlite://")), "sub", "dir", "new.db") // a bare path
			}
			r := runIn(t, "streams", "ls", "--store", url)
			if r.code != exitFailed || !strings.Contains(r.stderr, "no such store") || !strings.Contains(r.stderr, "varve init") {
				t.Fatalf("streams ls before init: exit %d, stderr %q", r.code, r.stderr)
			}
			out := filepath.Join(t.TempDir(), "init.json")
			r = runIn(t, "init", "--store", url, "--json="+out)
			kind := map[string]string{"sqlite": "file", "postgres": "schema", "nats": "stream"}[s.name]
			if r.code != exitOK || r.env["created"] != true || r.env["kind"] != kind || r.env["backend"] != s.name || r.env["name"] == "" {
				t.Fatalf("init: exit %d, %v\n%s", r.code, r.env, r.stderr)
			}
			if s.name != "sqlite" && !s.exists() {
				t.Fatalf("init made no %s", kind)
			}
			if s.name == "sqlite" {
				if _, err := os.Stat(url); err != nil || r.env["name"] != url {
					t.Fatalf("init made no file %s (%v): %v", url, r.env["name"], err)
				}
			}
			r = runIn(t, "append", "a-1", "--type", "E", "--data", `{"n":1}`, "--store", url)
			if r.code != exitOK {
				t.Fatalf("append after init: exit %d\n%s", r.code, r.stderr)
			}
			r = runIn(t, "init", "--store", url)
			if r.code != exitOK || !strings.Contains(r.stdout, "exists already") || !strings.Contains(r.stdout, "nothing changed") {
				t.Fatalf("init of an existing store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			r = runIn(t, "init", "--store", url, "--json="+out)
			if r.code != exitOK || r.env["created"] != false {
				t.Fatalf("init --json of an existing store: exit %d %v", r.code, r.env)
			}
			r = runIn(t, "streams", "show", "a-1", "--store", url, "--json="+out)
			if evs, _ := r.env["events"].([]any); r.code != exitOK || len(evs) != 1 {
				t.Fatalf("the second init changed the store: exit %d %v\n%s", r.code, r.env, r.stderr)
			}
		})
	}
	t.Run("text", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "t.db")
		r := runIn(t, "init", "--store", path)
		if r.code != exitOK || !strings.Contains(r.stdout, "created SQLite file "+path) {
			t.Fatalf("init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	for _, store := range []string{"memory:", "mem", "sqlite::memory:", "sqlite", "nope://x"} {
		if r := runIn(t, "init", "--store", store); r.code != exitUsage {
			t.Errorf("init --store %s: exit %d, want 2\n%s", store, r.code, r.stderr)
		}
	}
}

// decode reads the JSON a run printed on stdout.
func decode(t *testing.T, r result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return m
}
