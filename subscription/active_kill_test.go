package subscription_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/testenv"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/subscription"
)

// activeChild runs the subscription "killed" single-active and logs each
// event it handles with its process id.
func activeChild(ctx context.Context, s *varve.Store, log *os.File) error {
	pid := os.Getpid()
	cfg := subscription.Config{Name: "killed", MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond, PageSize: 16,
		Lease: subscription.Lease{Holder: fmt.Sprint("pid-", pid), TTL: 2 * time.Second}}
	return subscription.Run(ctx, s, cfg, func(_ context.Context, e varve.RecordedEvent) error {
		// One write(2) of a short line: whole or not at all, even when the
		// process is killed.
		_, err := fmt.Fprintf(log, "%d %s %d\n", pid, e.Stream, e.Version)
		return err
	})
}

// TestRunActiveKilled runs one subscription single-active in 3 processes
// on PostgreSQL while events are appended, and kills one process with
// SIGKILL every 100-400 ms (at least 20 kills), starting another in its
// place. The lease lasts 2 s, so a live holder does not lose it to a slow
// renewal on a loaded machine. At the end every event was handled; within each process's run
// the events of a stream came in version order; and every event handled
// twice was handled again by a process other than the first (a take-over
// re-delivers what the killed holder handled after its last checkpoint).
func TestRunActiveKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	raw := testenv.PostgresURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	schema := fmt.Sprintf("varve_active_%d", time.Now().UnixNano())
	q := u.Query()
	q.Set("varve_schema", schema)
	u.RawQuery = q.Encode()
	storeURL := u.String()
	ctx := t.Context()
	s, err := open.Store(ctx, storeURL, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		conn, err := pgx.Connect(context.Background(), raw)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	logPath := filepath.Join(t.TempDir(), "handled.log")
	start := func() *exec.Cmd { return startChild(t, "active", storeURL, logPath) }
	procs := []*exec.Cmd{start(), start(), start()}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	const streams, events = 10, 400
	rng := rand.New(rand.NewPCG(5, uint64(time.Now().UnixNano())))
	kills := 0
	for i := range events {
		if _, err := s.Append(ctx, fmt.Sprintf("acct-%d", i%streams), varve.Any, varve.NewEvent("Moved", nil)); err != nil {
			t.Fatal(err)
		}
		if i%15 == 14 {
			k := rng.IntN(len(procs))
			_ = procs[k].Process.Kill()
			_ = procs[k].Wait()
			procs[k] = start()
			kills++
			time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		}
	}
	// Wait until every event was handled; the bound is on a hang, not a
	// measured time.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		seen, _, _, err := readHandled(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) == events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events handled after %d kills", len(seen), events, kills)
		}
		time.Sleep(50 * time.Millisecond)
	}
	seen, dups, order, err := readHandled(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(order) > 0 {
		t.Fatalf("out of order within a process's run: %v", order[:min(5, len(order))])
	}
	t.Logf("%d events, %d kills, %d events handled again after a take-over", len(seen), kills, dups)
	if kills < 20 {
		t.Fatalf("only %d kills", kills)
	}
}

// readHandled reads the log: the events seen, how many were handled again
// by another process, and the order violations within a process.
func readHandled(path string) (seen map[string]string, dups int, order []string, err error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[string]string{}, 0, nil, nil
	}
	if err != nil {
		return nil, 0, nil, err
	}
	defer f.Close()
	seen = map[string]string{}
	last := map[string]int{} // pid stream -> version
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var pid, stream string
		var v int
		if _, err := fmt.Sscan(sc.Text(), &pid, &stream, &v); err != nil {
			continue // a line cut by a kill
		}
		key := fmt.Sprintf("%s@%d", stream, v)
		if first, ok := seen[key]; ok {
			if first == pid {
				order = append(order, key+" twice in "+pid)
			}
			dups++
		} else {
			seen[key] = pid
		}
		if pv := last[pid+" "+stream]; v <= pv {
			order = append(order, fmt.Sprintf("%s after version %d in %s", key, pv, pid))
		}
		last[pid+" "+stream] = v
	}
	return seen, dups, order, sc.Err()
}
