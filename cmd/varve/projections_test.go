package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/projection"
)

// TestProjectionsCommands drives a projection that runs in this process,
// on a SQLite file, through `varve projections`, which opens the file on
// its own: the runner follows pause, resume and rebuild, and list and
// status print what the store records at each step.
func TestProjectionsCommands(t *testing.T) {
	ctx := context.Background()
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "proj.db"))
	s, err := open.Store(ctx, url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendN := func(n int) {
		for i := range n {
			if _, err := s.Append(ctx, fmt.Sprintf("order-%d", i%3), varve.Any, varve.NewEvent("Placed", []byte(`{}`))); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(9)
	var mu sync.Mutex
	seen, resets := 0, 0
	p := projection.Projection{Name: "orders", Version: 1, Filter: varve.Filter{Categories: []string{"order"}},
		Handle: func(_ context.Context, b projection.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			seen += len(b.Events)
			return nil
		},
		Reset: func(context.Context, int) error {
			mu.Lock()
			defer mu.Unlock()
			seen, resets = 0, resets+1
			return nil
		}}
	count := func() (int, int) { mu.Lock(); defer mu.Unlock(); return seen, resets }
	r, err := projection.NewRunner(s, p, projection.Config{ControlPoll: 5 * time.Millisecond, Promote: true})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	<-r.Live()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitUntil("version 1 current", func() bool { v, _, _ := projection.Current(ctx, s, "orders"); return v == 1 })
	jsonFile := filepath.Join(t.TempDir(), "out.json")

	steps := []struct {
		name  string
		args  []string
		stdin string
		code  int
		out   []string     // in stdout
		after func() error // what must hold afterwards
	}{
		{"list", []string{"list"}, "", exitOK, []string{"NAME", "orders", "live", "1 projections"}, nil},
		{"status", []string{"status", "orders"}, "", exitOK,
			[]string{"projection orders: current version 1, paused false, 0 parked", "VERSION", "live"}, nil},
		{"status of an unknown projection", []string{"status", "nobody"}, "", exitFailed, nil, nil},
		{"pause of an unknown projection", []string{"pause", "nobody"}, "", exitFailed, nil, nil},
		{"pause", []string{"pause", "orders"}, "", exitOK, []string{"pause of orders requested"}, func() error {
			waitUntil("the runner paused", func() bool { return r.Status().State == projection.Paused })
			appendN(3)
			if n, _ := count(); n != 9 {
				return fmt.Errorf("%d events handled while paused, want 9", n)
			}
			return nil
		}},
		{"status while paused", []string{"status", "orders"}, "", exitOK, []string{"paused true", "paused"}, nil},
		{"resume", []string{"resume", "orders"}, "", exitOK, []string{"resume of orders requested"}, func() error {
			waitUntil("the events after the pause", func() bool { n, _ := count(); return n == 12 })
			return nil
		}},
		{"rebuild not confirmed", []string{"rebuild", "orders"}, "no\n", exitFailed, nil, func() error {
			if c, _ := projection.ReadControl(ctx, s, "orders"); len(c.Rebuilds) != 0 {
				return fmt.Errorf("a rebuild was requested: %+v", c)
			}
			return nil
		}},
		{"rebuild", []string{"rebuild", "orders"}, "orders\n", exitOK, []string{"rebuild of orders version 1 requested"}, func() error {
			waitUntil("the rebuild", func() bool { n, resets := count(); return resets == 1 && n == 12 })
			waitUntil("live after the rebuild", func() bool { return r.Status().State == projection.Live })
			return nil
		}},
		{"list --json", []string{"list", "--json=" + jsonFile, "--max-lag", "0"}, "", exitOK, nil, nil},
		{"no name", []string{"status"}, "", exitUsage, nil, nil},
		{"bad --version", []string{"rebuild", "orders", "--version", "-1", "--yes"}, "", exitUsage, nil, nil},
		{"no store", []string{"list", "--store", ""}, "", exitUsage, nil, nil},
	}
	for _, st := range steps {
		args := append([]string{"projections"}, st.args...)
		if !strings.Contains(strings.Join(st.args, " "), "--store") {
			args = append(args, "--store", url)
		}
		confirmIn = strings.NewReader(st.stdin)
		res := runIn(t, args...)
		confirmIn = os.Stdin
		if res.code != st.code {
			t.Fatalf("%s: exit %d, want %d\n%s%s", st.name, res.code, st.code, res.stdout, res.stderr)
		}
		for _, want := range st.out {
			if !strings.Contains(res.stdout, want) {
				t.Fatalf("%s: stdout lacks %q:\n%s", st.name, want, res.stdout)
			}
		}
		if st.after != nil {
			if err := st.after(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		if res.doc != nil {
			list := res.doc.([]any)
			p := list[0].(map[string]any)
			v := p["versions"].([]any)[0].(map[string]any)
			if len(list) != 1 || p["name"] != "orders" || p["current"] != 1.0 || v["state"] != "live" || v["lag"] != 0.0 || v["rebuild_pending"] != false {
				t.Fatalf("%s: results %v", st.name, list)
			}
		}
	}
}

// TestProjectionsMaxLag: --max-lag judges the current version and the
// newer ones being built, not an older version a promotion replaced.
func TestProjectionsMaxLag(t *testing.T) {
	ctx := context.Background()
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "lag.db"))
	s, err := open.Store(ctx, url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		if _, err := s.Append(ctx, fmt.Sprintf("order-%d", i), varve.Any, varve.NewEvent("Placed", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	head, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cps := s.Checkpoints()
	for name, pos := range map[string]varve.Position{projection.CheckpointName("orders", 1): varve.Start, projection.CheckpointName("orders", 2): head} {
		if err := cps.Save(ctx, name, pos); err != nil {
			t.Fatal(err)
		}
	}
	if err := projection.SetCurrent(ctx, s, "orders", 2); err != nil {
		t.Fatal(err)
	}
	if r := runIn(t, "projections", "list", "--store", url, "--max-lag", "0"); r.code != exitOK {
		t.Fatalf("an old version's lag tripped --max-lag: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A version being built beside the current one is judged.
	if err := cps.Save(ctx, projection.CheckpointName("orders", 3), varve.Start); err != nil {
		t.Fatal(err)
	}
	if r := runIn(t, "projections", "list", "--store", url, "--max-lag", "0"); r.code != exitFailed || !strings.Contains(r.stderr, "orders v3") {
		t.Fatalf("a new version's lag passed --max-lag 0: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
