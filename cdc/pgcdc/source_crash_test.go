package pgcdc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varve-go/varve/cdc/pgcdc"
	"github.com/varve-go/varve/delivery"
)

// sourceCrashEnv carries the child's configuration (JSON) to
// TestSourceCrashChild.
const sourceCrashEnv = "VARVE_PGCDC_SOURCE_CRASH_CHILD"

// TestSourceCrashChild is the consumer TestSourceCrash kills: a dispatcher
// of concurrency 8 over a Source of the slot keyed by column k, parking into a SQLite store,
// whose sink logs every change it takes ("D <commit LSN> <index> <k>
// <seq>") after the LSN the run started from ("S <confirmed flush LSN>").
// SIGTERM stops it cleanly.
func TestSourceCrashChild(t *testing.T) {
	raw := os.Getenv(sourceCrashEnv)
	if raw == "" {
		t.Skip("run by TestSourceCrash")
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
	parked := openCrashStore(t, cfg.Store)
	defer parked.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	s, err := pgcdc.Start(ctx, pgcdc.Config{ConnString: cfg.URL, Slot: cfg.Slot, Publication: cfg.Slot, StatusInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The rows of a key are ordered by seq: the ordering key is k, not the
	// primary key (k, seq).
	byK := func(c pgcdc.Change) (string, error) { return fmt.Sprintf("events-%v", c.New[0].Value), nil }
	src, err := pgcdc.NewSource(s, pgcdc.SourceConfig{Namespace: cfg.Slot, Stream: byK})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(log, "S %d\n", src.Position().Commit); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		var ev pgcdc.ChangeEvent
		if err := json.Unmarshal(d.Event.Data, &ev); err != nil {
			return delivery.Permanent(err)
		}
		// Key 3 is slow: it falls behind the others, so the checkpoint is
		// mostly inside a transaction (its other changes delivered, key 3's
		// pending) when the kill comes.
		pause := time.Duration(rand.IntN(1000)) * time.Microsecond
		if ev.New["k"] == float64(3) {
			pause = 4 * time.Millisecond
		}
		time.Sleep(pause)
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintf(log, "D %d %d %v %v\n", d.Event.Position.Commit, d.Event.Position.Seq, ev.New["k"], ev.New["seq"])
		return err
	})
	d, err := delivery.NewFromSource(src, sink, delivery.Config{Concurrency: 8, CheckpointInterval: 20 * time.Millisecond,
		Parked: delivery.NewParked(parked, src.Name())})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if st := d.Stats(); st.Parked > 0 {
		t.Fatalf("parked %d changes", st.Parked)
	}
}

// TestSourceCrash SIGKILLs a consumer running a dispatcher over a Source
// (a child process) at random points while a writer commits transactions
// of one row per key, restarts it each time, lets a last run catch up and
// stops it with SIGTERM, and checks: every committed change was delivered
// at least once; every run delivered each key's changes in order; every
// change a run delivered lies after the confirmed flush LSN it started
// from; and every change before a run's start LSN had been delivered by
// an earlier run (the slot moved only past delivered transactions). It
// counts the changes delivered again.
func TestSourceCrash(t *testing.T) {
	if os.Getenv(sourceCrashEnv) != "" || os.Getenv(crashEnv) != "" {
		t.Skip("in a child")
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
	cfg := crashConfig{URL: f.url, Slot: f.name, Store: filepath.Join(dir, "parked.db"), Log: filepath.Join(dir, "delivered.log")}

	ctx, stopWriter := context.WithCancel(context.Background())
	defer stopWriter()
	var wg sync.WaitGroup
	wg.Go(func() { _ = writer(ctx, f.url, "events", 0, keys, 2*time.Millisecond) })

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	began := time.Now()
	for kills := 0; kills < *crashKills; kills++ {
		child, out := sourceCrashChild(t, cfg)
		size0 := fileSize(cfg.Log)
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- child.Wait() }()
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
	}
	stopWriter()
	wg.Wait()
	want := committed(t, f, "events")
	rows := 0
	for _, m := range want {
		rows += int(m)
	}

	// The last run: until every committed row is in the log, then SIGTERM.
	child, out := sourceCrashChild(t, cfg)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		missing := uncovered(t, cfg.Log, want)
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = child.Process.Kill()
			<-exited
			t.Fatalf("%d committed changes were never delivered (the last run had 2 minutes):\n%s", missing, out.String())
		}
		select {
		case err := <-exited:
			t.Fatalf("the last run exited: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = child.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("the last run, stopped by SIGTERM: %v\n%s", err, out.String())
	}

	// The writer's last transaction may reach the server after its context
	// ended, as the connection closes: count again now.
	want = committed(t, f, "events")
	rows = 0
	for _, m := range want {
		rows += int(m)
	}
	if n := uncovered(t, cfg.Log, want); n > 0 {
		t.Errorf("%d committed changes were never delivered", n)
	}
	st := checkSourceCrashLog(t, cfg.Log)
	if st.runs != *crashKills+1 {
		t.Errorf("the log has %d runs, want %d (%d killed and the last)", st.runs, *crashKills+1, *crashKills)
		if dump := os.Getenv("VARVE_PGCDC_CRASH_DUMP"); dump != "" {
			raw, _ := os.ReadFile(cfg.Log)
			_ = os.WriteFile(dump, raw, 0o644)
		}
	}
	if st.distinct != rows {
		t.Errorf("%d distinct changes delivered, %d rows were committed", st.distinct, rows)
	}
	// A clean stop confirms everything it delivered.
	if info := inspect(t, f); uint64(info.ConfirmedFlushLSN) <= st.lastCommit {
		t.Errorf("after the clean stop the confirmed flush LSN is %s, before the last commit delivered (%d)", info.ConfirmedFlushLSN, st.lastCommit)
	}
	t.Logf("%d kills, %d runs, %d rows committed, %d deliveries, %d delivered again (all after their run's start LSN), in %v",
		*crashKills, st.runs, rows, st.deliveries, st.dups, time.Since(began).Round(time.Millisecond))
}

func sourceCrashChild(t *testing.T, cfg crashConfig) (*exec.Cmd, *strings.Builder) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSourceCrashChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), sourceCrashEnv+"="+string(raw), "VARVE_PG_LOGICAL_URL="+cfg.URL)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, out
}

type change struct {
	commit, index uint64
}

type delivered struct {
	change
	k, seq int
}

// readSourceCrashLog returns the runs' start LSNs and deliveries, leaving
// out the line a kill cut short.
func readSourceCrashLog(t *testing.T, path string) (starts []uint64, runs [][]delivered) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 2 && fields[0] == "S":
			lsn, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				continue
			}
			starts, runs = append(starts, lsn), append(runs, nil)
		case len(fields) == 5 && fields[0] == "D" && len(runs) > 0:
			var d delivered
			var err1, err2, err3, err4 error
			d.commit, err1 = strconv.ParseUint(fields[1], 10, 64)
			d.index, err2 = strconv.ParseUint(fields[2], 10, 64)
			d.k, err3 = strconv.Atoi(fields[3])
			d.seq, err4 = strconv.Atoi(fields[4])
			if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
				continue
			}
			runs[len(runs)-1] = append(runs[len(runs)-1], d)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return starts, runs
}

// uncovered counts the rows of want (key -> last seq) that the log lacks.
func uncovered(t *testing.T, path string, want map[int32]int32) int {
	_, runs := readSourceCrashLog(t, path)
	seen := map[[2]int]bool{}
	for _, run := range runs {
		for _, d := range run {
			seen[[2]int{d.k, d.seq}] = true
		}
	}
	n := 0
	for k, m := range want {
		for seq := 1; seq <= int(m); seq++ {
			if !seen[[2]int{int(k), seq}] {
				n++
			}
		}
	}
	return n
}

type sourceCrashStats struct {
	runs, deliveries, distinct, dups int
	lastCommit                       uint64
}

func checkSourceCrashLog(t *testing.T, path string) sourceCrashStats {
	t.Helper()
	starts, runs := readSourceCrashLog(t, path)
	st := sourceCrashStats{runs: len(runs)}
	firstRun := map[change]int{} // the run that first delivered a change
	for r, run := range runs {
		last := map[int]int{}
		thisRun := map[change]bool{}
		for _, d := range run {
			st.deliveries++
			st.lastCommit = max(st.lastCommit, d.commit)
			if d.commit <= starts[r] {
				t.Errorf("run %d delivered the change %d/%d, at or before its start LSN %d", r, d.commit, d.index, starts[r])
			}
			if thisRun[d.change] {
				t.Errorf("run %d delivered the change %d/%d twice", r, d.commit, d.index)
			}
			thisRun[d.change] = true
			if d.seq <= last[d.k] {
				t.Errorf("run %d: key %d got seq %d after %d", r, d.k, d.seq, last[d.k])
			}
			last[d.k] = d.seq
			if _, ok := firstRun[d.change]; ok {
				st.dups++
			} else {
				firstRun[d.change] = r
				st.distinct++
			}
		}
	}
	// The slot never moves back: with every run's deliveries after its
	// start, a change first delivered by run r lies after the start of
	// every run before r, so no run skipped it.
	for r := 1; r < len(starts); r++ {
		if starts[r] < starts[r-1] {
			t.Errorf("run %d started at %d, before run %d (%d)", r, starts[r], r-1, starts[r-1])
		}
	}
	return st
}
