package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/projection"
)

// operatorLeaves are the operator commands that run: serve, streams ls, ...
func operatorLeaves(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() {
			out = append(out, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, c := range root.Commands() {
		if operatorCommands[c.Name()] {
			walk(c)
		}
	}
	return out
}

// TestOperatorRefusesLabFlags: every operator command refuses every flag
// that only the lab's commands have, long or short, as a usage error that
// says it is the lab's; none has --check, --html or --keep.
func TestOperatorRefusesLabFlags(t *testing.T) {
	root := rootCmd(new(bool))
	groupCommands(root)
	labFlags := map[string]string{} // name: shorthand
	for _, c := range labCommands(root) {
		c.Flags().VisitAll(func(f *pflag.Flag) { labFlags[f.Name] = f.Shorthand })
	}
	for _, name := range []string{"check", "html", "keep", "workers", "duration", "rate"} {
		if _, ok := labFlags[name]; !ok {
			t.Fatalf("no lab command has --%s", name)
		}
	}
	leaves := operatorLeaves(root)
	if len(leaves) < 18 {
		t.Fatalf("%d operator commands, want at least 18", len(leaves))
	}
	for _, leaf := range leaves {
		path := strings.Fields(leaf.CommandPath())[1:]
		t.Run(strings.Join(path, " "), func(t *testing.T) {
			for _, name := range []string{"check", "html", "keep"} {
				if leaf.Flags().Lookup(name) != nil {
					t.Errorf("has the lab's --%s", name)
				}
			}
			refused := 0
			for name, short := range labFlags {
				if leaf.Flags().Lookup(name) != nil {
					continue // the operator's own flag of that name
				}
				given := [][]string{{"--" + name + "=1"}}
				if short != "" && leaf.Flags().ShorthandLookup(short) == nil {
					given = append(given, []string{"-" + short, "1"})
				}
				for _, g := range given {
					r := runIn(t, append(slices.Clone(path), g...)...)
					if r.code != exitUsage || !strings.Contains(r.stderr, g[0][:2]) || !strings.Contains(r.stderr, "is a flag of the lab commands") {
						t.Errorf("%s: exit %d, want %d and a usage error naming the lab\n%s", g[0], r.code, exitUsage, r.stderr)
					}
					refused++
				}
			}
			if refused < 20 {
				t.Errorf("only %d lab flags tried", refused)
			}
		})
	}
	if r := runIn(t, "subs", "ls", "--store", "memory:", "--check", "count<1000"); r.code != exitUsage || !strings.Contains(r.stderr, "--max-lag") {
		t.Errorf("subs ls --check: exit %d, the error does not point at --max-lag:\n%s", r.code, r.stderr)
	}
}

// projectionStore is opsStore with projection "orders": version 1's
// checkpoint at position 2, 7 events behind.
func projectionStore(t *testing.T) string {
	t.Helper()
	url := opsStore(t)
	s, err := open.Existing(context.Background(), url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Checkpoints().Save(context.Background(), projection.CheckpointName("orders", 1), varve.Position{Seq: 2}); err != nil {
		t.Fatal(err)
	}
	return url
}

// shape checks that v is an object with the keys required and no others
// than those and optional.
func shape(t *testing.T, what string, v any, required []string, optional ...string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: %T, want an object: %v", what, v, v)
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q: %v", what, k, m)
		}
	}
	for k := range m {
		if !slices.Contains(required, k) && !slices.Contains(optional, k) {
			t.Errorf("%s has %q, which is not documented: %v", what, k, m)
		}
	}
	return m
}

// list checks that v is an array of n objects of one shape.
func list(t *testing.T, what string, v any, n int, required []string, optional ...string) []map[string]any {
	t.Helper()
	a, ok := v.([]any)
	if !ok || len(a) != n {
		t.Fatalf("%s: %v, want an array of %d", what, v, n)
	}
	var out []map[string]any
	for _, e := range a {
		out = append(out, shape(t, what, e, required, optional...))
	}
	return out
}

// noEnvelope fails when any object in v has a key of the lab's envelope.
func noEnvelope(t *testing.T, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "machine" || k == "elapsed_ns" || k == "schema_version" || k == "exit_code" {
				t.Errorf("the lab's %q in an operator command's JSON", k)
			}
			noEnvelope(t, e)
		}
	case []any:
		for _, e := range v {
			noEnvelope(t, e)
		}
	}
}

// The shapes of the objects --json prints, as docs/lab.md lists them.
var (
	streamKeys     = []string{"stream", "version", "last_position", "created_at", "updated_at", "deleted", "tombstoned", "system"}
	eventKeys      = []string{"id", "stream", "version", "position", "type", "recorded_at"}
	eventOptional  = []string{"data", "data_base64", "metadata", "metadata_base64"}
	consumerKeys   = []string{"name", "checkpoint", "lag", "lag_more", "caught_up", "parked", "parked_stream", "running", "seen", "last_seen"}
	parkedKeys     = []string{"subscription", "stream", "version", "position", "event_id", "type", "attempts", "reason", "parked_at"}
	parkedOptional = []string{"error", "first_attempt", "event"}
	projectionKeys = []string{"name", "head", "paused", "current", "parked", "failure", "versions"}
	versionKeys    = []string{"version", "checkpoint", "origin", "lag", "lag_more", "pending_since", "parked", "running", "last_seen", "current", "rebuild_pending", "replay_pending", "state"}
	ruleKeys       = []string{"updated_at"}
	ruleOptional   = []string{"stream", "category", "max_age", "max_count", "truncate_before", "allow_empty"}
	reportKeys     = []string{"started", "finished", "holder", "rules", "streams", "truncated", "removed", "read_bytes", "reclaimed", "incomplete", "errors", "position"}
	reportOptional = []string{"truncations", "problems"}
)

// TestOperatorJSON runs each operator command with --json on a SQLite
// file: stdout is one JSON document of the documented shape, with none of
// the lab's envelope.
func TestOperatorJSON(t *testing.T) {
	store := projectionStore(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer hook.Close()
	parked := []string{"--store", store, "--subscription", "hooks"}
	// In order: the store changes as they run.
	for _, c := range []struct {
		name  string
		args  []string
		check func(t *testing.T, doc any)
	}{
		{"streams ls", []string{"streams", "ls", "--prefix", "order-", "--store", store}, func(t *testing.T, doc any) {
			m := shape(t, "streams ls", doc, []string{"streams", "next"})
			ss := list(t, "a stream", m["streams"], 2, streamKeys)
			if m["next"] != nil || ss[0]["stream"] != "order-1" || ss[1]["version"] != 2.0 {
				t.Errorf("streams ls: %v", m)
			}
		}},
		{"streams ls a page", []string{"streams", "ls", "--limit", "1", "--store", store}, func(t *testing.T, doc any) {
			m := shape(t, "streams ls", doc, []string{"streams", "next"})
			if list(t, "a stream", m["streams"], 1, streamKeys); m["next"] != "a" {
				t.Errorf("next %v, want a", m["next"])
			}
		}},
		{"streams show", []string{"streams", "show", "order-2", "--store", store}, func(t *testing.T, doc any) {
			m := shape(t, "streams show", doc, []string{"stream", "events", "next"})
			shape(t, "the stream", m["stream"], streamKeys)
			if evs := list(t, "an event", m["events"], 2, eventKeys, eventOptional...); evs[1]["version"] != 2.0 || m["next"] != nil {
				t.Errorf("streams show: %v", m)
			}
		}},
		{"subs ls", []string{"subs", "ls", "--store", store}, func(t *testing.T, doc any) {
			cs := list(t, "a consumer", doc, 3, consumerKeys)
			if cs[0]["name"] != "hooks" || cs[0]["lag"] != 9.0 || cs[0]["parked"] != 3.0 || cs[2]["name"] != "projector" || cs[2]["checkpoint"] != "2" {
				t.Errorf("subs ls: %v", cs)
			}
		}},
		{"subs reset", []string{"subs", "reset", "projector", "--to", "end", "--yes", "--store", store}, func(t *testing.T, doc any) {
			m := shape(t, "subs reset", doc, []string{"subscription", "from", "to"})
			if m["subscription"] != "projector" || m["from"] != "2" || m["to"] != "12" {
				t.Errorf("subs reset: %v", m)
			}
		}},
		{"parked list", append([]string{"parked", "list"}, parked...), func(t *testing.T, doc any) {
			if pes := list(t, "a parked event", doc, 3, parkedKeys, parkedOptional...); pes[0]["stream"] != "a" || pes[2]["reason"] != "rejected" {
				t.Errorf("parked list: %v", pes)
			}
		}},
		{"parked replay", append([]string{"parked", "replay", "--stream", "a", "--webhook", hook.URL, "--secret", "k"}, parked...), func(t *testing.T, doc any) {
			m := shape(t, "parked replay", doc, []string{"replayed", "failed", "held"})
			list(t, "a replayed event", m["replayed"], 2, parkedKeys, parkedOptional...)
			if list(t, "a failure", m["failed"], 0, nil); m["held"] != 0.0 {
				t.Errorf("parked replay: %v", m)
			}
		}},
		{"parked replay of a projection", []string{"parked", "replay", "--store", store, "--subscription", "projection-orders-v1"}, func(t *testing.T, doc any) {
			m := shape(t, "parked replay of a projection", doc, []string{"subscription", "projection", "request"})
			if m["projection"] != "orders" || m["request"] == 0.0 {
				t.Errorf("parked replay of a projection: %v", m)
			}
		}},
		{"parked skip", append([]string{"parked", "skip", "--all"}, parked...), func(t *testing.T, doc any) {
			list(t, "a skipped event", doc, 1, parkedKeys, parkedOptional...)
		}},
		{"projections list", []string{"projections", "list", "--store", store}, func(t *testing.T, doc any) {
			p := list(t, "a projection", doc, 1, projectionKeys)[0]
			v := list(t, "a version", p["versions"], 1, versionKeys)[0]
			if p["name"] != "orders" || v["lag"] != 7.0 || v["checkpoint"] != "2" {
				t.Errorf("projections list: %v", p)
			}
		}},
		{"projections status", []string{"projections", "status", "orders", "--store", store}, func(t *testing.T, doc any) {
			m := shape(t, "projections status", doc, projectionKeys)
			list(t, "a version", m["versions"], 1, versionKeys)
		}},
		{"projections pause", []string{"projections", "pause", "orders", "--store", store}, func(t *testing.T, doc any) {
			if m := shape(t, "projections pause", doc, []string{"projection", "requested"}); m["requested"] != "pause" {
				t.Errorf("pause: %v", m)
			}
		}},
		{"projections resume", []string{"projections", "resume", "orders", "--store", store}, func(t *testing.T, doc any) {
			shape(t, "projections resume", doc, []string{"projection", "requested"})
		}},
		{"projections rebuild", []string{"projections", "rebuild", "orders", "--yes", "--store", store}, func(t *testing.T, doc any) {
			if m := shape(t, "projections rebuild", doc, []string{"projection", "requested", "version"}); m["version"] != 1.0 {
				t.Errorf("rebuild: %v", m)
			}
		}},
		{"init", []string{"init", "--store", store}, func(t *testing.T, doc any) {
			if m := shape(t, "init", doc, []string{"store", "backend", "kind", "name", "created"}); m["created"] != false || m["kind"] != "file" {
				t.Errorf("init of an existing store: %v", m)
			}
		}},
		{"append", []string{"append", "order-9", "--type", "E", "--data", `{"n":1}`, "--store", store}, func(t *testing.T, doc any) {
			if m := shape(t, "append", doc, []string{"stream", "id", "type", "version", "position", "existed"}); m["version"] != 1.0 || m["existed"] != false {
				t.Errorf("append: %v", m)
			}
		}},
		{"streams truncate", []string{"streams", "truncate", "order-2", "--before", "2", "--yes", "--store", store}, func(t *testing.T, doc any) {
			if m := shape(t, "streams truncate", doc, []string{"stream", "action", "version", "before"}); m["before"] != 2.0 || m["version"] != 2.0 {
				t.Errorf("streams truncate: %v", m)
			}
		}},
		{"streams delete", []string{"streams", "delete", "order-1", "--yes", "--store", store}, func(t *testing.T, doc any) {
			if m := shape(t, "streams delete", doc, []string{"stream", "action", "version"}); m["action"] != "delete" {
				t.Errorf("streams delete: %v", m)
			}
		}},
		{"streams tombstone", []string{"streams", "tombstone", "order-9", "--yes", "--store", store}, func(t *testing.T, doc any) {
			if m := shape(t, "streams tombstone", doc, []string{"stream", "action", "version"}); m["action"] != "tombstone" || m["version"] != 1.0 {
				t.Errorf("streams tombstone: %v", m)
			}
		}},
		{"retention set", []string{"retention", "set", "--stream", "order-2", "--before", "3", "--allow-empty", "--store", store}, func(t *testing.T, doc any) {
			if m := shape(t, "retention set", doc, ruleKeys, ruleOptional...); m["stream"] != "order-2" || m["truncate_before"] != 3.0 || m["allow_empty"] != true {
				t.Errorf("retention set: %v", m)
			}
		}},
		{"retention run", []string{"retention", "run", "--store", store}, func(t *testing.T, doc any) {
			m := shape(t, "retention run", doc, reportKeys, reportOptional...)
			tr := list(t, "a truncation", m["truncations"], 1, []string{"stream", "before", "removed"})
			if m["removed"] != 1.0 || tr[0]["before"] != 3.0 {
				t.Errorf("retention run: %v", m)
			}
		}},
		{"retention list", []string{"retention", "list", "--store", store}, func(t *testing.T, doc any) {
			m := shape(t, "retention list", doc, []string{"policies", "last_report"})
			list(t, "a policy", m["policies"], 1, ruleKeys, ruleOptional...)
			shape(t, "the last report", m["last_report"], reportKeys, reportOptional...)
		}},
		{"retention remove", []string{"retention", "remove", "--stream", "order-2", "--store", store}, func(t *testing.T, doc any) {
			if m := shape(t, "retention remove", doc, []string{"stream", "action"}); m["action"] != "removed" {
				t.Errorf("retention remove: %v", m)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runIn(t, append(c.args, "--json")...)
			if r.code != exitOK {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			var doc any
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
				t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
			}
			noEnvelope(t, doc)
			c.check(t, doc)
		})
	}
	// A failure prints no JSON at all: the error goes to stderr.
	if r := runIn(t, "streams", "show", "nope", "--store", store, "--json"); r.code != exitFailed || r.stdout != "" || !strings.Contains(r.stderr, "not found") {
		t.Errorf("streams show of a missing stream: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestMaxLag: subs ls and projections list exit 1 when a consumer lags
// more than --max-lag events (or has more than --max-parked parked),
// naming it, and 0 when none does; the list is printed either way.
// The store: consumer "hooks" 9 events behind with 3 parked, "projector"
// and projection "orders" v1 7 behind; 3 system events among them.
func TestMaxLag(t *testing.T) {
	store := projectionStore(t)
	for _, c := range []struct {
		name       string
		args       []string
		code       int
		over, fine []string // named on stderr, not named
	}{
		{"subs under", []string{"subs", "ls", "--max-lag", "9"}, exitOK, nil, []string{"hooks", "projector"}},
		{"subs one over", []string{"subs", "ls", "--max-lag", "8"}, exitFailed, []string{"hooks: lag 9, over --max-lag 8"}, []string{"projector"}},
		{"subs all over", []string{"subs", "ls", "--max-lag", "0"}, exitFailed, []string{"3 of the 3 consumers listed are", "hooks", "projector", "projection-orders-v1"}, nil},
		{"subs lag limit under the bound", []string{"subs", "ls", "--lag-limit", "3", "--max-lag", "9"}, exitOK, nil, []string{"hooks"}},
		{"subs lag limit, over", []string{"subs", "ls", "--lag-limit", "3", "--max-lag", "8"}, exitFailed, []string{"hooks: lag > 8"}, []string{"projector"}},
		{"subs lag limit 0", []string{"subs", "ls", "--lag-limit", "0", "--max-lag", "7"}, exitFailed, []string{"hooks"}, []string{"projector"}},
		{"subs parked under", []string{"subs", "ls", "--max-parked", "3"}, exitOK, nil, []string{"hooks"}},
		{"subs parked over", []string{"subs", "ls", "--max-parked", "2"}, exitFailed, []string{"hooks: parked 3, over --max-parked 2"}, []string{"projector"}},
		{"subs both over", []string{"subs", "ls", "--max-parked", "2", "--max-lag", "8"}, exitFailed,
			[]string{"1 of the 3 consumers listed is over", "hooks: lag 9, over --max-lag 8", "hooks: parked 3, over --max-parked 2"}, []string{"projector"}},
		{"subs negative", []string{"subs", "ls", "--max-lag", "-1"}, exitUsage, []string{"--max-lag"}, nil},
		{"projections under", []string{"projections", "list", "--max-lag", "7"}, exitOK, nil, []string{"orders"}},
		{"projections over", []string{"projections", "list", "--max-lag", "6"}, exitFailed, []string{"1 of the 1 projections listed is over", "orders v1: lag 7, over --max-lag 6"}, nil},
		{"projections parked", []string{"projections", "list", "--max-parked", "0"}, exitOK, nil, []string{"orders"}},
		{"projections above what is counted", []string{"projections", "list", "--max-lag", "10001"}, exitUsage, []string{"--max-lag"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, asJSON := range []bool{false, true} {
				args := append(slices.Clone(c.args), "--store", store)
				if asJSON {
					args = append(args, "--json")
				}
				r := runIn(t, args...)
				if r.code != c.code {
					t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, c.code, r.stdout, r.stderr)
				}
				for _, want := range c.over {
					if !strings.Contains(r.stderr, want) {
						t.Errorf("%v: stderr lacks %q:\n%s", args, want, r.stderr)
					}
				}
				for _, not := range c.fine {
					if strings.Contains(r.stderr, not) {
						t.Errorf("%v: stderr names %q:\n%s", args, not, r.stderr)
					}
				}
				if c.code == exitUsage {
					continue
				}
				if !asJSON {
					if !strings.Contains(r.stdout, "NAME") {
						t.Errorf("%v: no table:\n%s", args, r.stdout)
					}
					continue
				}
				var doc []any
				if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc) == 0 {
					t.Errorf("%v: the list is not printed as JSON: %v\n%s", args, err, r.stdout)
				}
			}
		})
	}
}
