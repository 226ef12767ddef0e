package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

// The two-process watch test runs the test binary again as a child (selected
// by watchEnv, intercepted in TestMain) that opens the same file and appends
// one event for every line the parent writes to its stdin, then answers
// "ack <unix nanoseconds>" with the time its Append returned.

const watchEnv = "VARVE_SQLITE_WATCH_CHILD" // the database path

// watchChild runs the child if this process is one; it does not return
// then.
func watchChild() bool {
	path := os.Getenv(watchEnv)
	if path == "" {
		return false
	}
	err := runWatchChild(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "watch child:", err)
		os.Exit(2)
	}
	os.Exit(0)
	return true
}

func runWatchChild(path string) error {
	ctx := context.Background()
	b, err := sqlite.New(ctx, sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer b.Close()
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if _, err := s.Append(ctx, "child-"+in.Text(), varve.NoStream, varve.Event{Type: "Appended"}); err != nil {
			return err
		}
		if _, err := fmt.Printf("ack %d\n", time.Now().UnixNano()); err != nil {
			return err
		}
	}
	return in.Err()
}

// TestWatchOtherProcess: a reader waiting on Watch is woken by the appends
// of another process on the same file, each made while it waits, and sees
// every one of them. It logs the latency from the return of the child's
// Append to the parent's read that returned the event. The child commits
// about one round trip after the check that woke the parent for the
// previous event, and checks are WatchInterval apart, so the latency sits
// near WatchInterval less that round trip, not at half of WatchInterval as
// for commits that come at random moments.
func TestWatchOtherProcess(t *testing.T) {
	const (
		events = 200
		// A miss is a failure, not a slow wake-up: without wake-ups from
		// other processes the parent would wait for ever.
		perEvent = 5 * time.Second
	)
	path := tempDB(t)
	b := open(t, sqlite.Config{Path: path})
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), watchEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("child: %v\n%s", err, stderr.String())
			}
		})
	}
	defer stop()
	// A child that hangs is killed, which ends its output.
	kill := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	defer kill.Stop()
	acks := bufio.NewReader(stdout)

	var pos varve.Position
	latencies := make([]time.Duration, 0, events)
	for i := range events {
		watch := s.Watch()
		page, err := s.ReadAllPage(ctx, pos, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) != 0 {
			t.Fatalf("event %d: $all holds %d events the child was not asked for", i, len(page.Events))
		}
		if _, err := fmt.Fprintf(stdin, "%d\n", i); err != nil {
			t.Fatalf("event %d: ask the child: %v", i, err)
		}
		deadline := time.NewTimer(perEvent)
		var seen time.Time
		for seen.IsZero() {
			select {
			case <-watch:
			case <-deadline.C:
				t.Fatalf("event %d: not woken within %v of asking the child for it (%d seen before)", i, perEvent, i)
			}
			watch = s.Watch()
			page, err = s.ReadAllPage(ctx, pos, nil)
			if err != nil {
				t.Fatal(err)
			}
			switch len(page.Events) {
			case 0: // a spurious wake-up
			case 1:
				seen = time.Now()
				if e := page.Events[0]; e.Stream != fmt.Sprintf("child-%d", i) {
					t.Fatalf("event %d: read %s", i, e.Stream)
				}
				pos = page.Through
			default:
				t.Fatalf("event %d: read %d events", i, len(page.Events))
			}
		}
		deadline.Stop()
		line, err := acks.ReadString('\n')
		if err != nil {
			t.Fatalf("event %d: the child's acknowledgement: %v\n%s", i, err, stderr.String())
		}
		var ns int64
		if _, err := fmt.Sscanf(line, "ack %d\n", &ns); err != nil {
			t.Fatalf("child wrote %q: %v", line, err)
		}
		latencies = append(latencies, seen.Sub(time.Unix(0, ns)))
	}
	_ = stdin.Close()
	if line, err := acks.ReadString('\n'); err != io.EOF {
		t.Errorf("the child wrote more than %d acknowledgements: %q, %v", events, line, err)
	}
	stop()
	slices.Sort(latencies)
	t.Logf("%d appends of another process seen by a watcher (default WatchInterval): append return to seen p50 %v, p99 %v, max %v",
		events, latencies[len(latencies)/2], latencies[len(latencies)*99/100], latencies[len(latencies)-1])
}

// waitFor waits on b's Watch until cond holds, re-checking after every
// wake-up, and fails the test if it does not hold within a generous
// deadline.
func waitFor(t *testing.T, b *sqlite.Backend, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		watch := b.Watch()
		if cond() {
			return
		}
		select {
		case <-watch:
		case <-deadline.C:
			t.Fatalf("waited 10s on Watch for %s (stats %+v)", what, b.Stats())
		}
	}
}

// holds reports whether $all of b holds an event after pos.
func holds(t *testing.T, b *sqlite.Backend, after varve.Position) bool {
	t.Helper()
	evs, err := b.ReadAll(context.Background(), varve.AllQuery{After: after, Limit: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs) > 0
}

// TestWatchOtherBackend: appends through another Backend on the same file
// (another connection, as in another process) wake the waiters, also after
// the WAL was checkpointed, reset or truncated by a third connection, for a
// short and a long interval; nobody waiting, the file is not checked.
func TestWatchOtherBackend(t *testing.T) {
	for _, interval := range []time.Duration{sqlite.MinWatchInterval, 200 * time.Millisecond} {
		t.Run(interval.String(), func(t *testing.T) {
			path := tempDB(t)
			b := open(t, sqlite.Config{Path: path, WatchInterval: interval})
			other := open(t, sqlite.Config{Path: path})
			for i := range 5 {
				appendN(t, other, fmt.Sprintf("before-%d", i), varve.NoStream, 1)
			}
			if st := b.Stats(); st.WatchPolls != 0 {
				t.Fatalf("the file was checked %d times before anybody waited", st.WatchPolls)
			}
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for i, checkpoint := range []string{"", "PASSIVE", "", "RESTART", "TRUNCATE", ""} {
				last, err := b.LastPosition(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				watch := b.Watch()
				if checkpoint != "" {
					var busy, log, done int
					if err := db.QueryRow("PRAGMA wal_checkpoint("+checkpoint+")").Scan(&busy, &log, &done); err != nil || busy != 0 {
						t.Fatalf("checkpoint(%s): busy %d, %v", checkpoint, busy, err)
					}
				}
				appendN(t, other, fmt.Sprintf("s-%d", i), varve.NoStream, 1)
				select {
				case <-watch:
				case <-time.After(10 * time.Second):
					t.Fatalf("append %d of the other backend did not wake the waiter within 10s", i)
				}
				waitFor(t, b, fmt.Sprintf("the other backend's append after checkpoint(%s)", checkpoint), func() bool { return holds(t, b, last) })
			}
			// A channel taken from Watch counts as a waiter until the next
			// wake-up (waitFor left one): let the backend's own append wake
			// it. Then nobody waits, and at most the check under way is
			// still made, however many commits come.
			watch := b.Watch()
			appendN(t, b, "own", varve.NoStream, 1)
			<-watch
			polls := b.Stats().WatchPolls
			for i := range 20 {
				appendN(t, other, fmt.Sprintf("after-%d", i), varve.NoStream, 1)
			}
			if st := b.Stats(); st.WatchPolls > polls+1 {
				t.Fatalf("%d checks of the file while nobody waited", st.WatchPolls-polls)
			}
		})
	}
}

// TestWatchPollFailure: while the file cannot be opened by the watcher's
// connection (renamed away before the first wait), the waiters are woken
// after each failed check, the checks back off, and the backend goes on;
// once the file is back, another connection's append wakes them again.
func TestWatchPollFailure(t *testing.T) {
	const interval = sqlite.MinWatchInterval
	path := tempDB(t)
	b := open(t, sqlite.Config{Path: path, WatchInterval: interval})
	away := path + ".away"
	if err := os.Rename(path, away); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const failures = 8
	waitFor(t, b, "failed checks", func() bool { return b.Stats().WatchErrors >= failures })
	// Retry n waits at least half of interval·2^(n-1) (the jitter takes up
	// to half of it off); a watcher that did not back off would take about
	// failures·interval.
	if min := interval * (1<<(failures-1) - 1) / 2; time.Since(start) < min {
		t.Fatalf("%d failed checks within %v, want at least %v of back-off", b.Stats().WatchErrors, time.Since(start), min)
	}
	appendN(t, b, "during", varve.NoStream, 1) // the backend's own connections still work
	if err := os.Rename(away, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, "a successful check", func() bool { st := b.Stats(); return st.WatchPolls > st.WatchErrors })
	errs := b.Stats().WatchErrors
	other := open(t, sqlite.Config{Path: path})
	last := appendN(t, other, "after", varve.NoStream, 1).Position
	if !holds(t, b, varve.Position{}) {
		t.Fatal("the backend lost its events")
	}
	waitFor(t, b, "the other backend's append", func() bool {
		evs, err := b.ReadAll(context.Background(), varve.AllQuery{Limit: 10}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs) > 0 && evs[len(evs)-1].Position == last
	})
	if st := b.Stats(); st.WatchErrors != errs {
		t.Fatalf("checks failed after the file was back: %+v", st)
	}
}
