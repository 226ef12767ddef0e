package delivery_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/subscription"
)

var crashKills = flag.Int("delivery.crashes", 20, "how many times TestCrash SIGKILLs its child")

// crashEnv carries the child's configuration (JSON) to TestCrashChild.
const crashEnv = "VARVE_DELIVERY_CRASH_CHILD"

// crashConfig configures the child of TestCrash. By default the child's
// store is a SQLite file that survives its kills and the checkpoints are
// kept in it. VARVE_CRASH_STORE overrides the store (a URL in which "{dir}"
// stands for the test's temporary directory; it must name a fresh store;
// "memory:" makes the child refill a memory store deterministically) and
// VARVE_CRASH_CHECKPOINTS the checkpoints ("store", or "file:{dir}" for a
// file of their own).
type crashConfig struct {
	Store       string        `json:"store"`       // store URL; the child fills the store if it is empty
	Checkpoints string        `json:"checkpoints"` // "file:<dir>" or "store"
	Log         string        `json:"log"`         // the recording sink's file
	Events      int           `json:"events"`
	Streams     int           `json:"streams"`
	Seed        uint64        `json:"seed"`
	Concurrency int           `json:"concurrency"`
	Window      int           `json:"window"`
	Interval    time.Duration `json:"interval"` // checkpoint interval
}

// TestCrash SIGKILLs a child that delivers to a recording sink, at random
// points while it delivers, restarts it each time, lets the last one finish,
// and then checks the record: every event was delivered, every stream in
// version order within each run, no run skipped an event after its
// checkpoint, and every duplicate came after the checkpoint its run resumed
// from (the window that was delivered but not yet saved when it died).
func TestCrash(t *testing.T) {
	dir := t.TempDir()
	cfg := crashConfig{
		Store: "sqlite://" + filepath.ToSlash(dir) + "/crash.db", Checkpoints: "store", Log: filepath.Join(dir, "deliveries.log"),
		Events: max(3000, 100*(*crashKills)), Streams: 30, Seed: 42, Concurrency: 8, Window: 256, Interval: 10 * time.Millisecond,
	}
	if v := os.Getenv("VARVE_CRASH_STORE"); v != "" {
		cfg.Store = strings.ReplaceAll(v, "{dir}", dir)
	}
	if v := os.Getenv("VARVE_CRASH_CHECKPOINTS"); v != "" {
		cfg.Checkpoints = strings.ReplaceAll(v, "{dir}", dir)
	}
	raw, _ := json.Marshal(cfg)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	began := time.Now()

	kills := 0
	for kills < *crashKills {
		child, out := crashChild(raw)
		size0 := fileSize(cfg.Log)
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once the child delivered a random number of events, so that
		// every kill lands while it delivers.
		grow := int64(1+rng.IntN(120)) * 20
		exited := make(chan error, 1)
		go func() { exited <- child.Wait() }()
		var err error
		waiting := true
		for deadline := time.Now().Add(20 * time.Second); waiting && fileSize(cfg.Log) < size0+grow; {
			select {
			case err = <-exited:
				waiting = false
				continue
			case <-time.After(500 * time.Microsecond):
			}
			if time.Now().After(deadline) {
				child.Process.Kill()
				<-exited
				t.Fatalf("child delivered nothing for 20s; output:\n%s", out)
			}
		}
		if waiting {
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			_ = child.Process.Signal(syscall.SIGKILL)
			err = <-exited
		}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled():
			kills++
		case err == nil:
			t.Fatalf("the child finished after %d kills; give it more events. Output:\n%s", kills, out)
		default:
			t.Fatalf("child: %v; output:\n%s", err, out)
		}
	}
	child, out := crashChild(raw)
	if err := child.Run(); err != nil {
		t.Fatalf("last child: %v; output:\n%s", err, out)
	}

	// The events the child had to deliver: in its store when that is
	// durable, else the same fill in a store of our own.
	var want *varve.Store
	var err error
	if strings.HasPrefix(cfg.Store, "memory:") || strings.HasPrefix(cfg.Store, "mem:") {
		want, err = varve.New(memory.New(), varve.Config{})
		if err == nil {
			fill(t, want, "crash", cfg.Streams, cfg.Events, cfg.Seed)
		}
	} else {
		want, err = open.Store(context.Background(), cfg.Store, varve.Config{})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	var events []varve.RecordedEvent
	for e, err := range want.ReadAll(context.Background(), varve.Start) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(e.Stream, "$") {
			events = append(events, e)
		}
	}
	runs := parseCrashLog(t, cfg.Log)
	dups := checkCrashRuns(t, events, runs)
	deliveries := 0
	for _, r := range runs {
		deliveries += len(r.delivered)
	}
	t.Logf("%d kills, %d runs, %d events, %d deliveries, %d duplicates, in %v", kills, len(runs), len(events), deliveries, dups, time.Since(began).Round(time.Millisecond))
}

func crashChild(cfg []byte) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), crashEnv+"="+string(cfg))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd, &out
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

type crashDelivery struct {
	stream  string
	version varve.Version
	pos     varve.Position
}

type crashRun struct {
	start     varve.Position
	saved     []varve.Position
	delivered []crashDelivery
	finished  bool
}

func parseCrashLog(t *testing.T, path string) []*crashRun {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []*crashRun
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		bad := func() { t.Fatalf("bad log line %q", sc.Text()) }
		if len(fields) == 0 || fields[0] != "S" && len(runs) == 0 {
			bad()
		}
		pos := func(s string) varve.Position {
			p, err := varve.ParsePosition(s)
			if err != nil {
				bad()
			}
			return p
		}
		switch fields[0] {
		case "S":
			runs = append(runs, &crashRun{start: pos(fields[1])})
		case "C":
			runs[len(runs)-1].saved = append(runs[len(runs)-1].saved, pos(fields[1]))
		case "D":
			v, err := strconv.ParseUint(fields[2], 10, 64)
			if err != nil || len(fields) != 4 {
				bad()
			}
			runs[len(runs)-1].delivered = append(runs[len(runs)-1].delivered, crashDelivery{fields[1], v, pos(fields[3])})
		case "E":
			runs[len(runs)-1].finished = true
		default:
			bad()
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return runs
}

// checkCrashRuns checks the record against the events and returns the
// number of duplicate deliveries.
func checkCrashRuns(t *testing.T, events []varve.RecordedEvent, runs []*crashRun) int {
	t.Helper()
	if len(runs) == 0 || !runs[len(runs)-1].finished {
		t.Fatal("the last run did not finish")
	}
	delivered := map[varve.Position]bool{}
	var savedBefore varve.Position
	dups := 0
	for k, r := range runs {
		if r.start.Less(savedBefore) {
			t.Fatalf("run %d resumed from %v, before the checkpoint %v an earlier run saved", k, r.start, savedBefore)
		}
		next := map[string]varve.Version{} // the next version each stream must deliver in this run
		for _, e := range events {
			if !r.start.Less(e.Position) {
				if !delivered[e.Position] {
					t.Fatalf("run %d resumed from %v, but %s@%d (position %v) was never delivered", k, r.start, e.Stream, e.Version, e.Position)
				}
				continue
			}
			if _, ok := next[e.Stream]; !ok {
				next[e.Stream] = e.Version
			}
		}
		for _, d := range r.delivered {
			if want, ok := next[d.stream]; !ok || d.version != want {
				t.Fatalf("run %d (from %v) delivered %s@%d, want version %d next", k, r.start, d.stream, d.version, want)
			}
			next[d.stream]++
			if delivered[d.pos] {
				dups++
			}
			delivered[d.pos] = true
		}
		for _, p := range r.saved {
			if savedBefore.Less(p) {
				savedBefore = p
			}
		}
	}
	for _, e := range events {
		if !delivered[e.Position] {
			t.Fatalf("%s@%d (position %v) was never delivered", e.Stream, e.Version, e.Position)
		}
	}
	return dups
}

// TestCrashChild is the child of TestCrash; it runs only when started by it.
func TestCrashChild(t *testing.T) {
	raw := os.Getenv(crashEnv)
	if raw == "" {
		t.Skip("started by TestCrash")
	}
	var cfg crashConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := open.Store(ctx, cfg.Store, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// Positions are the same on every start: one goroutine, the same seed,
	// the same appends, into an empty store (a durable one is filled once).
	end, err := store.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if end.IsZero() {
		end = fill(t, store, "crash", cfg.Streams, cfg.Events, cfg.Seed)
	}
	logf, err := os.OpenFile(cfg.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	record := func(format string, args ...any) {
		// One write per line: O_APPEND keeps lines whole across a SIGKILL.
		if _, err := fmt.Fprintf(logf, format+"\n", args...); err != nil {
			panic(err)
		}
	}

	var cps varve.CheckpointStore
	switch {
	case strings.HasPrefix(cfg.Checkpoints, "file:"):
		cps = fileCheckpoints{dir: strings.TrimPrefix(cfg.Checkpoints, "file:")}
	case cfg.Checkpoints == "store":
		var ok bool
		if cps, ok = store.Backend().(varve.CheckpointStore); !ok {
			t.Fatalf("store %s keeps no checkpoints", cfg.Store)
		}
	default:
		t.Fatalf("checkpoints %q: want file:<dir> or store", cfg.Checkpoints)
	}
	sub, err := subscription.Open(ctx, store, subscription.Config{
		Name: "crash", PageSize: 50, Checkpoints: loggedCheckpoints{cps, record},
	})
	if err != nil {
		t.Fatal(err)
	}
	start, _ := sub.StartPosition()
	record("S %v", start)

	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		mu.Lock()
		latency, fail := time.Duration(rng.IntN(500))*time.Microsecond, rng.IntN(20) == 0
		mu.Unlock()
		if err := sleepCtx(ctx, latency); err != nil {
			return err
		}
		if fail {
			return errors.New("random failure")
		}
		record("D %s %d %v", d.Event.Stream, d.Event.Version, d.Event.Position)
		return nil
	})
	d, err := delivery.New(sub, sink, delivery.Config{
		Concurrency: cfg.Concurrency, Window: cfg.Window, CheckpointInterval: cfg.Interval, Logger: quiet,
		Retry: subscription.RetryPolicy{MaxAttempts: -1, MaxAge: time.Hour, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	werr := d.WaitFor(ctx, end)
	cancel()
	if err := <-done; err != nil || werr != nil {
		t.Fatalf("run: %v, wait: %v", err, werr)
	}
	record("E")
}

// fileCheckpoints keeps checkpoints in files: a temporary file, fsync,
// rename, so that a checkpoint survives a SIGKILL (and a power loss) whole.
type fileCheckpoints struct{ dir string }

func (f fileCheckpoints) path(name string) string {
	return filepath.Join(f.dir, url.PathEscape(name)+".checkpoint")
}

func (f fileCheckpoints) SaveCheckpoint(_ context.Context, name string, pos varve.Position) error {
	tmp, err := os.CreateTemp(f.dir, ".checkpoint-*")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(pos.String())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path(name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save checkpoint %q: %w", name, err)
	}
	d, err := os.Open(f.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (f fileCheckpoints) LoadCheckpoint(_ context.Context, name string) (varve.Position, bool, error) {
	b, err := os.ReadFile(f.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return varve.Position{}, false, nil
	}
	if err != nil {
		return varve.Position{}, false, err
	}
	p, err := varve.ParsePosition(string(b))
	return p, err == nil, err
}

// loggedCheckpoints records every saved checkpoint in the delivery log.
type loggedCheckpoints struct {
	varve.CheckpointStore
	record func(format string, args ...any)
}

func (l loggedCheckpoints) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	if err := l.CheckpointStore.SaveCheckpoint(ctx, name, pos); err != nil {
		return err
	}
	l.record("C %v", pos)
	return nil
}
