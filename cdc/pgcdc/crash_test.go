package pgcdc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
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
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/cdc/pgcdc"
)

var crashKills = flag.Int("pgcdc.crashes", 20, "how many times TestCrash SIGKILLs its child")

// crashEnv carries the child's configuration (JSON) to TestCrashChild.
const crashEnv = "VARVE_PGCDC_CRASH_CHILD"

type crashConfig struct {
	URL   string `json:"url"`
	Slot  string `json:"slot"`
	Store string `json:"store"` // SQLite file
	Log   string `json:"log"`   // what each run received
	// Rows, when set, makes the child stop once the store holds that many
	// events (the final run); otherwise it runs until killed.
	Rows int `json:"rows"`
}

func openCrashStore(t *testing.T, path string) *varve.Store {
	t.Helper()
	b, err := sqlite.New(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	store, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// TestCrashChild is the consumer TestCrash kills: it pumps the slot into a
// SQLite store, one stream for the table, and logs every transaction it
// receives ("D <end LSN> k:seq ...") after the LSN it started from
// ("S <confirmed flush LSN>").
func TestCrashChild(t *testing.T) {
	raw := os.Getenv(crashEnv)
	if raw == "" {
		t.Skip("run by TestCrash")
	}
	var cfg crashConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	log, err := os.OpenFile(cfg.Log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	store := openCrashStore(t, cfg.Store)
	defer store.Close()
	ctx := context.Background()
	s, err := pgcdc.Start(ctx, pgcdc.Config{ConnString: cfg.URL, Slot: cfg.Slot, Publication: cfg.Slot, StatusInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The line starts with a newline: the kill of the previous run may have
	// left its last line without one, which would swallow this one.
	if _, err := fmt.Fprintf(log, "\nS %d\n", uint64(s.Flushed())); err != nil {
		t.Fatal(err)
	}
	scfg := pgcdc.StoreConfig{Layout: pgcdc.PerTable, Namespace: cfg.Slot}
	for {
		tx, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var line strings.Builder
		fmt.Fprintf(&line, "D %d", uint64(tx.EndLSN))
		for _, c := range tx.Changes {
			fmt.Fprintf(&line, " %d:%d", c.New[0].Value, c.New[1].Value)
		}
		line.WriteByte('\n')
		if _, err := log.WriteString(line.String()); err != nil {
			t.Fatal(err)
		}
		if err := pgcdc.AppendToStore(ctx, store, tx, scfg); err != nil {
			t.Fatal(err)
		}
		if err := s.Ack(tx); err != nil {
			t.Fatal(err)
		}
		if cfg.Rows > 0 {
			info, err := store.StreamInfo(ctx, cfg.Slot+".events")
			if err != nil {
				t.Fatal(err)
			}
			if int(info.Version) >= cfg.Rows {
				return
			}
		}
	}
}

// TestCrash SIGKILLs the consumer (a child process) at random points while
// a writer commits multi-row transactions, restarts it each time, lets a
// last run catch up, and checks: the store holds every committed change
// exactly once (appends are idempotent) in per-key order; every run
// received each key's changes in order; and every change a run received
// again had been received before only after the LSN that run started from
// (the slot's confirmed flush LSN): duplicates come only from the
// unacknowledged suffix.
func TestCrash(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	const keys = 4
	f := newFixture(t, "CREATE TABLE events (k int, seq int, PRIMARY KEY (k, seq))")
	if _, err := pgcdc.EnsurePublication(context.Background(), f.conn, f.name, []string{f.name + ".events"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pgcdc.EnsureSlot(context.Background(), f.conn, f.name); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := crashConfig{URL: f.url, Slot: f.name, Store: filepath.Join(dir, "crash.db"), Log: filepath.Join(dir, "received.log")}

	ctx, stopWriter := context.WithCancel(context.Background())
	defer stopWriter()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = writer(ctx, f.url, "events", 0, keys, 2*time.Millisecond)
	}()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	began := time.Now()
	for kills := 0; kills < *crashKills; {
		child, out := crashChild(t, cfg)
		size0 := fileSize(cfg.Log)
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- child.Wait() }()
		// Kill it at a random point after it received something.
		deadline := time.Now().Add(time.Minute)
		for fileSize(cfg.Log) <= size0+64 && time.Now().Before(deadline) {
			select {
			case err := <-exited:
				t.Fatalf("child exited before it was killed: %v\n%s", err, out.String())
			case <-time.After(5 * time.Millisecond):
			}
		}
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		_ = child.Process.Signal(syscall.SIGKILL)
		if err := <-exited; err == nil {
			t.Fatalf("child finished before it was killed:\n%s", out.String())
		}
		kills++
	}
	stopWriter()
	wg.Wait()

	want := committed(t, f, "events")
	rows := 0
	for _, m := range want {
		rows += int(m)
	}
	cfg.Rows = rows
	child, out := crashChild(t, cfg)
	if err := child.Run(); err != nil {
		t.Fatalf("last run: %v\n%s", err, out.String())
	}

	// The store: every change once, per key in order.
	store := openCrashStore(t, cfg.Store)
	defer store.Close()
	next := map[int32]int32{}
	n := 0
	for e, err := range store.ReadStream(context.Background(), f.name+".events") {
		if err != nil {
			t.Fatal(err)
		}
		var ev pgcdc.ChangeEvent
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			t.Fatal(err)
		}
		k, seq := int32(ev.New["k"].(float64)), int32(ev.New["seq"].(float64))
		if seq != next[k]+1 {
			t.Fatalf("store: key %d has seq %d after %d", k, seq, next[k])
		}
		next[k] = seq
		n++
	}
	if n != rows {
		t.Errorf("store holds %d events, %d rows were committed", n, rows)
	}
	for k, m := range want {
		if next[k] != m {
			t.Errorf("store: key %d up to %d, committed up to %d", k, next[k], m)
		}
	}

	// The runs: per-key order within each, duplicates only after the
	// confirmed flush LSN the run started from.
	runs, dups, deliveries := checkCrashLog(t, cfg.Log)
	if runs != *crashKills+1 {
		t.Errorf("the log holds the start of %d runs, want %d (killed ones and the last)", runs, *crashKills+1)
	}
	t.Logf("%d kills, %d runs, %d rows committed, %d transactions received, %d received again (all after their run's start LSN), in %v",
		*crashKills, runs, rows, deliveries, dups, time.Since(began).Round(time.Millisecond))
}

func crashChild(t *testing.T, cfg crashConfig) (*exec.Cmd, *bytes.Buffer) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashEnv+"="+string(raw), "VARVE_PG_LOGICAL_URL="+cfg.URL)
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

func checkCrashLog(t *testing.T, path string) (runs, dups, deliveries int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seenAt := map[uint64]bool{} // transactions received by an earlier run
	var (
		start   uint64
		thisRun map[uint64]bool
		last    map[string]int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue // the line a kill cut short
		}
		lsn, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			continue // cut short
		}
		switch fields[0] {
		case "S":
			for k := range thisRun {
				seenAt[k] = true
			}
			runs++
			start, thisRun, last = lsn, map[uint64]bool{}, map[string]int{}
		case "D":
			if thisRun == nil {
				t.Fatalf("a delivery before the first run started")
			}
			deliveries++
			if lsn <= start {
				t.Errorf("run %d received the transaction ending at %d, at or before its start %d", runs, lsn, start)
			}
			if thisRun[lsn] {
				t.Errorf("run %d received the transaction ending at %d twice", runs, lsn)
			}
			thisRun[lsn] = true
			if seenAt[lsn] {
				dups++
			}
			for _, kv := range fields[2:] {
				k, v, ok := strings.Cut(kv, ":")
				seq, err := strconv.Atoi(v)
				if !ok || err != nil {
					break // cut short
				}
				if seq <= last[k] {
					t.Errorf("run %d: key %s got seq %d after %d", runs, k, seq, last[k])
				}
				last[k] = seq
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return runs, dups, deliveries
}
