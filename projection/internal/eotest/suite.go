package eotest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/shred"
)

// OverlappingBatches hands the CommitFunc batches whose bounds overlap
// the checkpoint, as a retry with another page size after a commit that
// landed late does, or a second runner: every event is applied once.
func OverlappingBatches(t *testing.T, f Factory) {
	tg := f.Open(t)
	s := tg.Store
	Load(t, s, 3, 10, 1)
	// All 30 events: another client's transaction on a shared server may
	// hold $all back a while after the appends.
	evs := counted(t, f, s, 30)
	commit, err := tg.Commit()
	if err != nil {
		t.Fatal(err)
	}
	batch := func(from, to int) projection.Batch {
		return projection.Batch{Events: evs[from:to], Through: evs[to-1].Position, Version: 1}
	}
	type overlapCase struct {
		name    string
		b       projection.Batch
		applied bool           // ErrApplied
		upTo    int            // the events in the read model after it
		cp      varve.Position // the checkpoint after it; zero: that of event upTo
	}
	cases := []overlapCase{
		{"first", batch(0, 10), false, 10, varve.Position{}},
		{"same again", batch(0, 10), true, 10, varve.Position{}},
		{"inside", batch(3, 8), true, 10, varve.Position{}},
		{"overlapping", batch(5, 21), false, 21, varve.Position{}},
		{"empty batch behind", projection.Batch{Through: evs[2].Position, Version: 1}, false, 21, varve.Position{}},
	}
	if f.SeqPositions {
		gap := varve.Position{Seq: evs[21].Position.Seq - 1} // an event of another category
		cases = append(cases,
			overlapCase{"empty batch ahead", projection.Batch{Through: gap, Version: 1}, false, 21, gap},
			overlapCase{"overlapping the empty one", batch(18, 30), false, 30, varve.Position{}})
	} else {
		cases = append(cases, overlapCase{"overlapping again", batch(18, 30), false, 30, varve.Position{}})
	}
	for _, tc := range cases {
		err := commit(context.Background(), projection.CheckpointName(Name, 1), tc.b)
		if tc.applied != errors.Is(err, projection.ErrApplied) || !tc.applied && err != nil {
			t.Fatalf("%s: %v (want ErrApplied: %v)", tc.name, err, tc.applied)
		}
		if tc.cp.IsZero() {
			tc.cp = evs[tc.upTo-1].Position
		}
		got, cp := tg.ReadModel(t, 1)
		if want := fold(t, s, evs[tc.upTo-1].Position); cp != tc.cp || !maps.Equal(got, want) {
			t.Fatalf("%s: read model at %v, want %v:\n got %v\nwant %v", tc.name, cp, tc.cp, got, want)
		}
	}
	// A parked event applied again (projection.ReplayParked) is behind the
	// checkpoint: it is applied all the same, and the checkpoint stays.
	_, before := tg.ReadModel(t, 1)
	last := evs[len(evs)-1]
	err = commit(context.Background(), projection.CheckpointName(Name, 1),
		projection.Batch{Events: evs[len(evs)-1:], Through: before, Version: 1, Parked: true})
	if err != nil {
		t.Fatalf("parked batch: %v", err)
	}
	got, cp := tg.ReadModel(t, 1)
	want := fold(t, s, before)
	want[last.Stream] = Row{N: want[last.Stream].N + 1, Last: want[last.Stream].Last}
	if cp != before || !maps.Equal(got, want) {
		t.Fatalf("parked batch: read model at %v, want %v:\n got %v\nwant %v", cp, before, got, want)
	}
}

// ExactlyOnceUnderCancel stops the projection at random points while
// events are appended: in half of the runs inside a batch's transaction,
// after a random number of events; in the others a random time after the
// first event. After each stop the read model must be exactly the fold of
// the events up to the checkpoint. The stops follow the handler's progress
// rather than the clock, so that a slow machine still stops it at work, and
// the runs go on until the checkpoint has moved in 10 of them.
func ExactlyOnceUnderCancel(t *testing.T, f Factory) {
	tg := f.Open(t)
	s := tg.Store
	Load(t, s, 10, f.CancelAppends, 5)
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
		onEvent := func() {
			mu.Lock()
			defer mu.Unlock()
			seen++
			switch {
			case midBatch && seen == after:
				cancel()
			case !midBatch && seen == 1:
				time.AfterFunc(wait, cancel)
			}
		}
		// A run that finds no event to handle stops all the same.
		timer := time.AfterFunc(2*time.Second, cancel)
		p, err := tg.Projection(projection.Projection{Name: Name, Version: 1, Filter: Counted}, onEvent)
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
		cp := checkExact(t, tg, 1)
		if last.Less(cp) {
			moved++
		}
		last = cp
	}
	stopWriter()
	wg.Wait()
	p, _ := tg.Projection(projection.Projection{Name: Name, Version: 1, Filter: Counted}, nil)
	runToHead(t, f, s, p)
	head, _ := s.LastPosition(context.Background())
	if cp := checkExact(t, tg, 1); cp != head {
		t.Fatalf("checkpoint %v, want the head %v", cp, head)
	}
}

// CrashChild runs the projection that ExactlyOnceUnderSIGKILL kills, in
// pages of pageSize, until it is killed.
func CrashChild(t *testing.T, tg Target, pageSize int) {
	p, err := tg.Projection(projection.Projection{Name: Name, Version: 1, Filter: Counted}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := projection.NewRunner(tg.Store, p, projection.Config{PageSize: pageSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Fatal(r.Run(context.Background())) // until killed
}

// Kills says how ExactlyOnceUnderSIGKILL runs and kills its children.
type Kills struct {
	// Count is the number of kills.
	Count int
	// Seed seeds, beside 3, the children's random page sizes and the
	// random delays before the kills.
	Seed uint64
	// Env returns the environment variables, beyond the test's own, that
	// make the package's TestCrashChild open the store under test and call
	// CrashChild with pageSize.
	Env func(pageSize int) []string
	// Label, when not empty, prefixes the summary logged at the end.
	Label string
}

// ExactlyOnceUnderSIGKILL kills a child process running the projection
// (the package's TestCrashChild) with SIGKILL at random points, k.Count
// times, and checks after each kill that the read model is exactly the
// fold of the events up to the checkpoint. The test process appends to the
// store between kills. Callers skip it under -short.
func ExactlyOnceUnderSIGKILL(t *testing.T, tg Target, k Kills) {
	s := tg.Store
	Load(t, s, 20, 40, 10)
	rng := rand.New(rand.NewPCG(3, k.Seed))
	kills, moved := 0, 0
	var last varve.Position
	for kills < k.Count {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), k.Env(1+rng.IntN(50))...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once the child is at work: when its checkpoint has moved.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			cp, _, err := s.Checkpoints().Load(context.Background(), projection.CheckpointName(Name, 1))
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
		cp := checkExact(t, tg, 1)
		if last.Less(cp) {
			moved++
		}
		last = cp
		head, _ := s.LastPosition(context.Background())
		if !cp.Less(head) {
			Load(t, s, 20, 10, 10) // keep the child busy
		}
	}
	if moved < kills/2 {
		t.Errorf("the checkpoint moved in only %d of %d runs", moved, kills)
	}
	label := ""
	if k.Label != "" {
		label = k.Label + ": "
	}
	t.Logf("%s%d kills, checkpoint moved in %d runs", label, kills, moved)
}

// RebuildUnderWrites builds version 2 into a table of its own while
// version 1 serves and events are appended; version 2 becomes current once
// it has caught up, and both read models then equal the fold of every
// event exactly, with the filter pushed down to the backend's filtered
// reads (subtest pushdown) and filtered in the runner (local-filter).
func RebuildUnderWrites(t *testing.T, f Factory) {
	for _, tc := range []struct {
		name  string
		local bool
	}{{"local-filter", true}, {"pushdown", false}} {
		t.Run(tc.name, func(t *testing.T) {
			rebuildUnderWrites(t, f, tc.local)
		})
	}
}

func rebuildUnderWrites(t *testing.T, f Factory, local bool) {
	tg := f.Open(t)
	s := tg.Store
	ctx := context.Background()
	Load(t, s, 10, 10, 5)
	runner := func(version int) *projection.Runner {
		p, err := tg.Projection(projection.Projection{Name: Name, Version: version, Filter: Counted}, nil)
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
		v, _, err := projection.Current(ctx, s, Name)
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
		if cp := checkExact(t, tg, v); cp.Less(head) {
			t.Errorf("version %d at %v, before the head %v", v, cp, head)
		}
	}
	if written == 0 {
		t.Error("no event was written during the rebuild")
	}
}

// TwoRunnersApplyOnce runs two runners of the same version at once: the
// forward-only checkpoint makes the later commit of each batch roll back
// (ErrApplied), so the read model still equals the fold.
func TwoRunnersApplyOnce(t *testing.T, f Factory) {
	tg := f.Open(t)
	s := tg.Store
	Load(t, s, 10, 20, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runners []*projection.Runner
	done := make(chan error, 2)
	for range 2 {
		p, err := tg.Projection(projection.Projection{Name: Name, Version: 1, Filter: Counted}, nil)
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
	if cp := checkExact(t, tg, 1); cp != head {
		t.Fatalf("checkpoint %v, want the head %v", cp, head)
	}
}

// Erasures: a projection with Erasures whose handler calls the package's
// DeleteErased removes an erased subject's rows (here a stream's row, the
// subject being the stream id) in the batch that moves its checkpoint past
// the erasure report, leaves the others, and the runner records how many
// rows it removed in the erasure stream.
func Erasures(t *testing.T, f Factory) {
	tg := f.Open(t)
	s := tg.Store
	ctx := context.Background()
	Load(t, s, 3, 2, 1)
	key := uuid.New()
	report, _ := json.Marshal(shred.Report{Subject: "cnt-1", Key: key, Master: "m", At: time.Now()})
	res, err := s.System().Append(ctx, shred.ErasureStream, varve.Any, varve.NewEvent(shred.ErasedType, report))
	if err != nil {
		t.Fatal(err)
	}
	p, err := tg.Projection(projection.Projection{Name: Name, Version: 1, Filter: Counted, Erasures: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := projection.NewRunner(s, p, projection.Config{MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx); stop() }()
	werr := r.WaitFor(rctx, res.Position)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	got, _ := tg.ReadModel(t, 1)
	if _, ok := got["cnt-1"]; ok || got["cnt-0"].N != 2 || got["cnt-2"].N != 2 {
		t.Fatalf("read model after the erasure of cnt-1: %v", got)
	}
	var recorded []shred.ReadModelErasure
	for e, err := range s.ReadStream(ctx, shred.ErasureStream) {
		if err != nil {
			t.Fatal(err)
		}
		if rm, ok := shred.ParseReadModelErasure(e); ok {
			recorded = append(recorded, rm)
		}
	}
	if len(recorded) != 1 || recorded[0].Subject != "cnt-1" || recorded[0].Key != key || recorded[0].Rows != 1 {
		t.Fatalf("recorded read-model erasures: %+v", recorded)
	}
}
