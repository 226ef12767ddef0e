package sqliteprojection_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/projection/sqliteprojection"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run()) // the crash child is killed; it leaves goroutines
	}
	goleak.VerifyTestMain(m)
}

var counted = varve.Filter{Categories: []string{"cnt"}}

func table(version int) string { return "counts_v" + strconv.Itoa(version) }

// counts is the read model under test: events per stream, and the version
// of the last one, in a table per projection version.
func counts(onEvent func()) sqliteprojection.Handler {
	return func(ctx context.Context, tx *sql.Tx, b projection.Batch) error {
		t := table(b.Version)
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (stream TEXT PRIMARY KEY, n INTEGER NOT NULL, last INTEGER NOT NULL)`); err != nil {
			return err
		}
		for _, e := range b.Events {
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+t+` (stream, n, last) VALUES (?1, 1, ?2)
ON CONFLICT (stream) DO UPDATE SET n = n + 1, last = excluded.last`, e.Stream, int64(e.Version)); err != nil {
				return err
			}
			if onEvent != nil {
				onEvent()
			}
		}
		return nil
	}
}

type row struct{ n, last int64 }

// fold is the read model as it must be: the fold of the matching events
// up to upTo.
func fold(t testing.TB, s *varve.Store, upTo varve.Position) map[string]row {
	t.Helper()
	want := map[string]row{}
	for e, err := range s.ReadAll(context.Background(), varve.Start, counted) {
		if err != nil {
			t.Fatal(err)
		}
		if upTo.Less(e.Position) {
			break
		}
		r := want[e.Stream]
		want[e.Stream] = row{r.n + 1, int64(e.Version)}
	}
	return want
}

// readModel reads the read model of version and its checkpoint in one
// read transaction, so that a commit that lands in between cannot split
// them.
func readModel(t testing.TB, b *sqlite.Backend, version int) (map[string]row, varve.Position) {
	t.Helper()
	got := map[string]row{}
	var cp varve.Position
	err := b.ReadTx(context.Background(), func(tx *sql.Tx) error {
		var c, q int64
		err := tx.QueryRow(`SELECT commit_id, seq FROM checkpoints WHERE name = ?1`, projection.CheckpointName("counts", version)).Scan(&c, &q)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cp = varve.Position{Commit: uint64(c), Seq: uint64(q)}
		var exists int
		if err := tx.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = ?1`, table(version)).Scan(&exists); err != nil || exists == 0 {
			return err // no table yet: an empty read model
		}
		rows, err := tx.Query(`SELECT stream, n, last FROM ` + table(version))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var r row
			if err := rows.Scan(&s, &r.n, &r.last); err != nil {
				return err
			}
			got[s] = r
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, cp
}

// checkExact compares the read model of version with the fold of the
// events up to its checkpoint, and returns the checkpoint.
func checkExact(t testing.TB, s *varve.Store, b *sqlite.Backend, version int) varve.Position {
	t.Helper()
	got, cp := readModel(t, b, version)
	if want := fold(t, s, cp); !maps.Equal(want, got) {
		t.Fatalf("read model v%d at checkpoint %v:\n got %v\nwant %v", version, cp, got, want)
	}
	return cp
}

func openAt(t testing.TB, cfg sqlite.Config) (*varve.Store, *sqlite.Backend) {
	t.Helper()
	b, err := sqlite.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, b
}

func openSQLite(t testing.TB) (*varve.Store, *sqlite.Backend) {
	return openAt(t, sqlite.Config{Path: filepath.Join(t.TempDir(), "varve.db")})
}

// load appends streams×appends batches of per events to category cnt, and
// a few events of another category.
func load(t testing.TB, s *varve.Store, streams, appends, per int) {
	t.Helper()
	ctx := context.Background()
	for a := range appends {
		for i := range streams {
			evs := make([]varve.Event, per)
			for k := range evs {
				evs[k] = varve.NewEvent("Counted", []byte(`{}`))
			}
			if _, err := s.Append(ctx, fmt.Sprintf("cnt-%d", i), varve.Any, evs...); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Append(ctx, fmt.Sprintf("other-%d", a), varve.Any, varve.NewEvent("Other", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
}

// runToHead runs p until its checkpoint reaches the head of the log.
func runToHead(t *testing.T, s *varve.Store, p projection.Projection) {
	t.Helper()
	r, err := projection.NewRunner(s, p, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-r.Live()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBackend(t *testing.T) {
	cases := []struct {
		name  string
		store func(t *testing.T) *varve.Store
		want  error
	}{
		{"nil store", func(*testing.T) *varve.Store { return nil }, varve.ErrInvalidArgument},
		{"sqlite", func(t *testing.T) *varve.Store { s, _ := openSQLite(t); return s }, nil},
		{"memory", func(t *testing.T) *varve.Store {
			s, err := varve.New(memory.New(), varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, varve.ErrNotSupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.store(t)
			if s != nil {
				t.Cleanup(func() { _ = s.Close() })
			}
			_, err := sqliteprojection.Projection(s, projection.Projection{Name: "counts", Version: 1}, counts(nil))
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestOverlappingBatches hands the CommitFunc batches whose bounds overlap
// the checkpoint, as a retry with another page size after a commit that
// landed late does, or a second runner: every event is applied once.
func TestOverlappingBatches(t *testing.T) {
	s, b := openSQLite(t)
	load(t, s, 3, 10, 1)
	var evs []varve.RecordedEvent
	for e, err := range s.ReadAll(context.Background(), varve.Start, counted) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	commit, err := sqliteprojection.Commit(s, counts(nil))
	if err != nil {
		t.Fatal(err)
	}
	batch := func(from, to int) projection.Batch {
		return projection.Batch{Events: evs[from:to], Through: evs[to-1].Position, Version: 1}
	}
	gap := varve.Position{Seq: evs[21].Position.Seq - 1} // an event of another category
	cases := []struct {
		name    string
		b       projection.Batch
		applied bool           // ErrApplied
		upTo    int            // the events in the read model after it
		cp      varve.Position // the checkpoint after it; zero: that of event upTo
	}{
		{"first", batch(0, 10), false, 10, varve.Position{}},
		{"same again", batch(0, 10), true, 10, varve.Position{}},
		{"inside", batch(3, 8), true, 10, varve.Position{}},
		{"overlapping", batch(5, 21), false, 21, varve.Position{}},
		{"empty batch behind", projection.Batch{Through: evs[2].Position, Version: 1}, false, 21, varve.Position{}},
		{"empty batch ahead", projection.Batch{Through: gap, Version: 1}, false, 21, gap},
		{"overlapping the empty one", batch(18, 30), false, 30, varve.Position{}},
	}
	for _, tc := range cases {
		err := commit(context.Background(), projection.CheckpointName("counts", 1), tc.b)
		if tc.applied != errors.Is(err, projection.ErrApplied) || !tc.applied && err != nil {
			t.Fatalf("%s: %v (want ErrApplied: %v)", tc.name, err, tc.applied)
		}
		if tc.cp.IsZero() {
			tc.cp = evs[tc.upTo-1].Position
		}
		got, cp := readModel(t, b, 1)
		if want := fold(t, s, evs[tc.upTo-1].Position); cp != tc.cp || !maps.Equal(got, want) {
			t.Fatalf("%s: read model at %v, want %v:\n got %v\nwant %v", tc.name, cp, tc.cp, got, want)
		}
	}
}

// TestExactlyOnceUnderCancel stops the projection at random points while
// events are appended: in half of the runs inside a batch's transaction,
// after a random number of events; in the others a random time after the
// first event. After each stop the read model must be exactly the fold of
// the events up to the checkpoint. The stops follow the handler's progress
// rather than the clock, so that a slow machine still stops it at work, and
// the runs go on until the checkpoint has moved in 10 of them.
func TestExactlyOnceUnderCancel(t *testing.T) {
	s, b := openSQLite(t)
	load(t, s, 10, 40, 5)
	var wg sync.WaitGroup
	wctx, stopWriter := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; wctx.Err() == nil; i++ {
			if _, err := s.Append(wctx, fmt.Sprintf("cnt-w%d", i%7), varve.Any, varve.NewEvent("Counted", []byte(`{}`))); err != nil && wctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	var moved int
	var last varve.Position
	for i := 0; i < 40 || moved < 10; i++ {
		if i == 400 {
			t.Fatalf("the checkpoint moved in only %d of %d runs: the test proves little", moved, i)
		}
		ctx, cancel := context.WithCancel(context.Background())
		midBatch := i%2 == 0
		// A stop after more events than a batch holds comes after a commit.
		size := 1 + rng.IntN(60)
		after, wait := 1+rng.IntN(3*size), time.Duration(rng.IntN(40))*time.Millisecond
		var mu sync.Mutex
		seen := 0
		h := counts(func() {
			mu.Lock()
			defer mu.Unlock()
			seen++
			switch {
			case midBatch && seen == after:
				cancel()
			case !midBatch && seen == 1:
				time.AfterFunc(wait, cancel)
			}
		})
		// A run that finds no event to handle stops all the same.
		timer := time.AfterFunc(2*time.Second, cancel)
		p, err := sqliteprojection.Projection(s, projection.Projection{Name: "counts", Version: 1, Filter: counted}, h)
		if err != nil {
			t.Fatal(err)
		}
		r, err := projection.NewRunner(s, p, projection.Config{PageSize: size})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(ctx); err != nil {
			t.Fatalf("stop %d: Run: %v", i, err)
		}
		timer.Stop()
		cancel()
		cp := checkExact(t, s, b, 1)
		if last.Less(cp) {
			moved++
		}
		last = cp
	}
	stopWriter()
	wg.Wait()
	p, _ := sqliteprojection.Projection(s, projection.Projection{Name: "counts", Version: 1, Filter: counted}, counts(nil))
	runToHead(t, s, p)
	head, _ := s.LastPosition(context.Background())
	if cp := checkExact(t, s, b, 1); cp != head {
		t.Fatalf("checkpoint %v, want the head %v", cp, head)
	}
}

const childEnv = "SQLITEPROJECTION_CRASH_DB"

// TestCrashChild is the projection that TestExactlyOnceUnderSIGKILL kills:
// it only runs in the child process.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("runs as the child of TestExactlyOnceUnderSIGKILL")
	}
	cfg, err := sqlite.ParseURL("sqlite://" + path + "?synchronous=" + os.Getenv(childEnv+"_SYNC"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := openAt(t, cfg)
	size, _ := strconv.Atoi(os.Getenv(childEnv + "_PAGE"))
	p, err := sqliteprojection.Projection(s, projection.Projection{Name: "counts", Version: 1, Filter: counted}, counts(nil))
	if err != nil {
		t.Fatal(err)
	}
	r, err := projection.NewRunner(s, p, projection.Config{PageSize: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Fatal(r.Run(context.Background())) // until killed
}

// TestExactlyOnceUnderSIGKILL kills a child process running the projection
// with SIGKILL at random points, at least 20 times in each synchronous
// mode, and checks after each kill that the read model is exactly the fold
// of the events up to the checkpoint. The test process appends to the same
// file between kills.
func TestExactlyOnceUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for i, mode := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "varve.db")
			s, b := openAt(t, sqlite.Config{Path: path, Synchronous: mode})
			load(t, s, 20, 40, 10)
			rng := rand.New(rand.NewPCG(3, uint64(4+i)))
			kills, moved := 0, 0
			var last varve.Position
			for kills < 22 {
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), childEnv+"="+path, childEnv+"_SYNC="+mode.String(), childEnv+"_PAGE="+strconv.Itoa(1+rng.IntN(50)))
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// Kill once the child is at work: when its checkpoint has moved.
				deadline := time.Now().Add(time.Minute)
				for time.Now().Before(deadline) {
					cp, _, err := s.Checkpoints().Load(context.Background(), projection.CheckpointName("counts", 1))
					if err != nil {
						t.Fatal(err)
					}
					if last.Less(cp) {
						break
					}
					time.Sleep(time.Millisecond)
				}
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
					t.Fatalf("child %d ended before it was killed: %v\n%s", kills, cmd.ProcessState, out.Bytes())
				}
				kills++
				cp := checkExact(t, s, b, 1)
				if last.Less(cp) {
					moved++
				}
				last = cp
				head, _ := s.LastPosition(context.Background())
				if !cp.Less(head) {
					load(t, s, 20, 10, 10) // keep the child busy
				}
			}
			if moved < kills/2 {
				t.Errorf("the checkpoint moved in only %d of %d runs", moved, kills)
			}
			t.Logf("%s: %d kills, checkpoint moved in %d runs", mode, kills, moved)
		})
	}
}

// TestRebuildUnderWrites builds version 2 into a table of its own while
// version 1 serves and events are appended; version 2 becomes current once
// it has caught up, and both read models then equal the fold of every
// event exactly, with the filter pushed down and filtered in the runner.
func TestRebuildUnderWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local bool
	}{{"local-filter", true}, {"pushdown", false}} {
		t.Run(tc.name, func(t *testing.T) {
			testRebuildUnderWrites(t, tc.local)
		})
	}
}

func testRebuildUnderWrites(t *testing.T, local bool) {
	s, b := openSQLite(t)
	ctx := context.Background()
	load(t, s, 10, 10, 5)
	runner := func(version int) *projection.Runner {
		p, err := sqliteprojection.Projection(s, projection.Projection{Name: "counts", Version: version, Filter: counted}, counts(nil))
		if err != nil {
			t.Fatal(err)
		}
		r, err := projection.NewRunner(s, p, projection.Config{PageSize: 13, Promote: true, LocalFilter: local})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	run := func(r *projection.Runner) (stop func()) {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	current := func() int {
		v, _, err := projection.Current(ctx, s, "counts")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	r1 := runner(1)
	stop1 := run(r1)
	waitFor("version 1 current", func() bool { return current() == 1 })
	var wg sync.WaitGroup
	wctx, stopWriter := context.WithCancel(ctx)
	var written int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; wctx.Err() == nil; i++ {
			if _, err := s.Append(ctx, fmt.Sprintf("cnt-w%d", i%5), varve.Any, varve.NewEvent("Counted", []byte(`{}`))); err != nil {
				t.Error(err)
				return
			}
			written = i + 1
		}
	}()
	r2 := runner(2)
	stop2 := run(r2)
	waitFor("version 2 current", func() bool { return current() == 2 })
	stopWriter()
	wg.Wait()
	head, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("both at the head", func() bool { return !r1.Status().Position.Less(head) && !r2.Status().Position.Less(head) })
	stop1()
	stop2()
	for _, v := range []int{1, 2} {
		if cp := checkExact(t, s, b, v); cp.Less(head) {
			t.Errorf("version %d at %v, before the head %v", v, cp, head)
		}
	}
	if written == 0 {
		t.Error("no event was written during the rebuild")
	}
}

// TestTwoRunnersApplyOnce runs two runners of the same version at once:
// the forward-only checkpoint makes the later commit of each batch roll
// back (ErrAlreadyApplied), so the read model still equals the fold.
func TestTwoRunnersApplyOnce(t *testing.T) {
	s, b := openSQLite(t)
	load(t, s, 10, 20, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runners []*projection.Runner
	done := make(chan error, 2)
	for range 2 {
		p, err := sqliteprojection.Projection(s, projection.Projection{Name: "counts", Version: 1, Filter: counted}, counts(nil))
		if err != nil {
			t.Fatal(err)
		}
		r, err := projection.NewRunner(s, p, projection.Config{PageSize: 7})
		if err != nil {
			t.Fatal(err)
		}
		runners = append(runners, r)
		go func() { done <- r.Run(ctx) }()
	}
	for _, r := range runners {
		<-r.Live()
	}
	cancel()
	for range runners {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	head, _ := s.LastPosition(context.Background())
	if cp := checkExact(t, s, b, 1); cp != head {
		t.Fatalf("checkpoint %v, want the head %v", cp, head)
	}
}
