package pgprojection_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/internal/testenv"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/projection/pgprojection"
)

var counted = varve.Filter{Categories: []string{"cnt"}}

func table(schema string, version int) string { return schema + ".counts_v" + strconv.Itoa(version) }

// counts is the read model under test: events per stream, and the version
// of the last one, in a table per projection version.
func counts(schema string, onEvent func()) pgprojection.Handler {
	return func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
		t := table(schema, b.Version)
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (stream text PRIMARY KEY, n bigint NOT NULL, last bigint NOT NULL)`); err != nil {
			return err
		}
		for _, e := range b.Events {
			if _, err := tx.Exec(ctx, `INSERT INTO `+t+` AS t (stream, n, last) VALUES ($1, 1, $2)
ON CONFLICT (stream) DO UPDATE SET n = t.n + 1, last = EXCLUDED.last`, e.Stream, int64(e.Version)); err != nil {
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
// snapshot, so that a commit of a killed child that lands late cannot come
// between the two.
func readModel(t testing.TB, pool *pgxpool.Pool, schema string, version int) (map[string]row, varve.Position) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var cp varve.Position
	var c, q int64
	err = tx.QueryRow(ctx, `SELECT commit_pos, seq_pos FROM `+schema+`.checkpoints WHERE name = $1`,
		projection.CheckpointName("counts", version)).Scan(&c, &q)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	cp = varve.Position{Commit: uint64(c), Seq: uint64(q)}
	got := map[string]row{}
	rows, err := tx.Query(ctx, `SELECT stream, n, last FROM `+table(schema, version))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return got, cp // no table yet: an empty read model
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var r row
		if err := rows.Scan(&s, &r.n, &r.last); err != nil {
			t.Fatal(err)
		}
		got[s] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got, cp
}

// checkExact compares the read model of version with the fold of the
// events up to its checkpoint, and returns the checkpoint.
func checkExact(t testing.TB, s *varve.Store, pool *pgxpool.Pool, schema string, version int) varve.Position {
	t.Helper()
	got, cp := readModel(t, pool, schema, version)
	if want := fold(t, s, cp); !maps.Equal(want, got) {
		t.Fatalf("read model v%d at checkpoint %v:\n got %v\nwant %v", version, cp, got, want)
	}
	return cp
}

func openPG(t testing.TB) (*varve.Store, *postgres.Backend) {
	t.Helper()
	b := teststore.Postgres(t)
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, b.(*postgres.Backend)
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

// runToHead runs version until its checkpoint reaches the head of the log.
func runToHead(t *testing.T, s *varve.Store, p projection.Projection) {
	t.Helper()
	r, err := projection.NewRunner(s, p, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	head, err := s.LastPosition(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for r.Status().Position.Less(head) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pos := r.Status().Position; pos.Less(head) {
		t.Fatalf("gave up at %v before the head %v", pos, head)
	}
}

// TestOverlappingBatches hands the CommitFunc batches whose bounds overlap
// the checkpoint, as a retry with another page size after a commit that
// landed late does, or a second runner: every event is applied once.
func TestOverlappingBatches(t *testing.T) {
	s, b := openPG(t)
	load(t, s, 3, 10, 1)
	// All 30 events: another client's transaction on a shared server may
	// hold $all back a while after the appends.
	var evs []varve.RecordedEvent
	for deadline := time.Now().Add(time.Minute); len(evs) < 30; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("$all holds %d of the 30 events", len(evs))
		}
		evs = evs[:0]
		for e, err := range s.ReadAll(context.Background(), varve.Start, counted) {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e)
		}
	}
	commit, err := pgprojection.Commit(s, counts(b.Schema(), nil))
	if err != nil {
		t.Fatal(err)
	}
	batch := func(from, to int) projection.Batch {
		return projection.Batch{Events: evs[from:to], Through: evs[to-1].Position, Version: 1}
	}
	cases := []struct {
		name    string
		b       projection.Batch
		applied bool // ErrApplied
		upTo    int  // the events in the read model after it
	}{
		{"first", batch(0, 10), false, 10},
		{"same again", batch(0, 10), true, 10},
		{"inside", batch(3, 8), true, 10},
		{"overlapping", batch(5, 21), false, 21},
		{"empty batch behind", projection.Batch{Through: evs[2].Position, Version: 1}, false, 21},
		{"overlapping again", batch(18, 30), false, 30},
	}
	for _, tc := range cases {
		err := commit(context.Background(), projection.CheckpointName("counts", 1), tc.b)
		if tc.applied != errors.Is(err, projection.ErrApplied) || !tc.applied && err != nil {
			t.Fatalf("%s: %v (want ErrApplied: %v)", tc.name, err, tc.applied)
		}
		got, cp := readModel(t, b.Pool(), b.Schema(), 1)
		if want := fold(t, s, evs[tc.upTo-1].Position); cp != evs[tc.upTo-1].Position || !maps.Equal(got, want) {
			t.Fatalf("%s: read model at %v, want %v:\n got %v\nwant %v", tc.name, cp, evs[tc.upTo-1].Position, got, want)
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
	s, b := openPG(t)
	load(t, s, 10, 20, 5)
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
		h := counts(b.Schema(), func() {
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
		p, err := pgprojection.Projection(s, projection.Projection{Name: "counts", Version: 1, Filter: counted}, h)
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
		cp := checkExact(t, s, b.Pool(), b.Schema(), 1)
		if last.Less(cp) {
			moved++
		}
		last = cp
	}
	stopWriter()
	wg.Wait()
	p, _ := pgprojection.Projection(s, projection.Projection{Name: "counts", Version: 1, Filter: counted}, counts(b.Schema(), nil))
	runToHead(t, s, p)
	head, _ := s.LastPosition(context.Background())
	if cp := checkExact(t, s, b.Pool(), b.Schema(), 1); cp != head {
		t.Fatalf("checkpoint %v, want the head %v", cp, head)
	}
}

const childEnv = "PGPROJECTION_CRASH_SCHEMA"

// TestCrashChild is the projection that TestExactlyOnceUnderSIGKILL kills:
// it only runs in the child process.
func TestCrashChild(t *testing.T) {
	schema := os.Getenv(childEnv)
	if schema == "" {
		t.Skip("runs as the child of TestExactlyOnceUnderSIGKILL")
	}
	cfg, err := postgres.ParseURL(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Schema, cfg.NoMigrate = schema, true
	b, err := postgres.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	size, _ := strconv.Atoi(os.Getenv(childEnv + "_PAGE"))
	p, err := pgprojection.Projection(s, projection.Projection{Name: "counts", Version: 1, Filter: counted}, counts(b.Schema(), nil))
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
// with SIGKILL at random points, at least 20 times, and checks after each
// kill that the read model is exactly the fold of the events up to the
// checkpoint.
func TestExactlyOnceUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	s, b := openPG(t)
	load(t, s, 20, 40, 10)
	rng := rand.New(rand.NewPCG(3, 4))
	kills, moved := 0, 0
	var last varve.Position
	for kills < 24 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+strings.Trim(b.Schema(), `"`), childEnv+"_PAGE="+strconv.Itoa(1+rng.IntN(50)))
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
		cp := checkExact(t, s, b.Pool(), b.Schema(), 1)
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
	t.Logf("%d kills, checkpoint moved in %d runs", kills, moved)
}

// TestRebuildUnderWrites builds version 2 into a table of its own while
// version 1 serves and events are appended; version 2 becomes current once
// it has caught up, and both read models then equal the fold of every
// event exactly.
//
// Both with the filter pushed down to PostgreSQL's filtered reads and with
// the runner filtering itself. Pushed down, versions missed events in half
// of 30 runs before the backend took a filtered page and its through from
// one evaluation of the horizon (a transaction that writes no events, the
// projection's own, could lower the second statement's horizon).
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
	s, b := openPG(t)
	ctx := context.Background()
	load(t, s, 10, 10, 5)
	runner := func(version int) *projection.Runner {
		p, err := pgprojection.Projection(s, projection.Projection{Name: "counts", Version: version, Filter: counted}, counts(b.Schema(), nil))
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
		if cp := checkExact(t, s, b.Pool(), b.Schema(), v); cp.Less(head) {
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
	s, b := openPG(t)
	load(t, s, 10, 20, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runners []*projection.Runner
	done := make(chan error, 2)
	for range 2 {
		p, err := pgprojection.Projection(s, projection.Projection{Name: "counts", Version: 1, Filter: counted}, counts(b.Schema(), nil))
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
	if cp := checkExact(t, s, b.Pool(), b.Schema(), 1); cp != head {
		t.Fatalf("checkpoint %v, want the head %v", cp, head)
	}
}
