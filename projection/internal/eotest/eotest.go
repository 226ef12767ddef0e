// Package eotest is the exactly-once suite that the projection packages
// with a transactional read model (pgprojection, sqliteprojection) share.
// A package's test fills in a [Factory] and calls one function of the
// suite per test of its own, under the same name: OverlappingBatches from
// TestOverlappingBatches, and so on.
//
// The read model under test counts the events of each stream of the
// category cnt ([Counted]) and keeps the version of the last one, in a
// table per projection version; the package under test writes it with its
// own SQL, and the suite compares it with the fold of the events up to the
// projection's checkpoint, read in the same snapshot.
//
// ExactlyOnceUnderSIGKILL starts the test binary again to run the
// package's TestCrashChild, which must open the store the environment
// names and call [CrashChild].
package eotest

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/projection"
)

// Name is the name of the projection under test.
const Name = "counts"

// Counted selects the events the read model counts.
var Counted = varve.Filter{Categories: []string{"cnt"}}

// Row is a stream's row in the read model: its events, and the version
// of the last one.
type Row struct{ N, Last int64 }

// Factory is what a package under test supplies to the suite.
type Factory struct {
	// Open opens a fresh store, closed when t ends.
	Open func(t testing.TB) Target
	// Horizon says that $all may show committed events a while after
	// their appends returned (PostgreSQL, where another client's
	// transaction on a shared server holds the horizon back):
	// OverlappingBatches then waits until $all shows the events it
	// appended, and the suite runs a projection to the head by its
	// checkpoint rather than by Runner.Live.
	Horizon bool
	// SeqPositions says that positions are sequence numbers alone, so
	// that the position of an event of another category lies between two
	// counted ones: OverlappingBatches then also hands an empty batch ahead
	// of the checkpoint.
	SeqPositions bool
	// CancelAppends is how many rounds of appends ([Load] of 10 streams,
	// 5 events each) ExactlyOnceUnderCancel makes before its runs.
	CancelAppends int
}

// Target is a store and the package's hold on the read model in it.
type Target struct {
	Store *varve.Store
	// Projection returns p with the package's CommitFunc writing the read
	// model. onEvent, when not nil, is called in the transaction after
	// each event written.
	Projection func(p projection.Projection, onEvent func()) (projection.Projection, error)
	// Commit returns the package's CommitFunc writing the read model.
	Commit func() (projection.CommitFunc, error)
	// ReadModel returns the read model of version and the checkpoint of
	// Name at that version, read in one snapshot, so that a commit landing
	// late cannot come between the two. No table yet is an empty read
	// model.
	ReadModel func(t testing.TB, version int) (map[string]Row, varve.Position)
}

// Load appends streams×appends batches of per events to category cnt, and
// a few events of another category.
func Load(t testing.TB, s *varve.Store, streams, appends, per int) {
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

// fold is the read model as it must be: the fold of the matching events
// up to upTo.
func fold(t testing.TB, s *varve.Store, upTo varve.Position) map[string]Row {
	t.Helper()
	want := map[string]Row{}
	for e, err := range s.ReadAll(context.Background(), varve.Start, Counted) {
		if err != nil {
			t.Fatal(err)
		}
		if upTo.Less(e.Position) {
			break
		}
		r := want[e.Stream]
		want[e.Stream] = Row{r.N + 1, int64(e.Version)}
	}
	return want
}

// checkExact compares the read model of version with the fold of the
// events up to its checkpoint, and returns the checkpoint.
func checkExact(t testing.TB, tg Target, version int) varve.Position {
	t.Helper()
	got, cp := tg.ReadModel(t, version)
	if want := fold(t, tg.Store, cp); !maps.Equal(want, got) {
		t.Fatalf("read model v%d at checkpoint %v:\n got %v\nwant %v", version, cp, got, want)
	}
	return cp
}

// counted returns the n counted events, waiting for them under Horizon.
func counted(t testing.TB, f Factory, s *varve.Store, n int) []varve.RecordedEvent {
	t.Helper()
	read := func() []varve.RecordedEvent {
		var evs []varve.RecordedEvent
		for e, err := range s.ReadAll(context.Background(), varve.Start, Counted) {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e)
		}
		return evs
	}
	if !f.Horizon {
		return read()
	}
	var evs []varve.RecordedEvent
	for deadline := time.Now().Add(time.Minute); len(evs) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("$all holds %d of the %d events", len(evs), n)
		}
		evs = read()
	}
	return evs
}

// runToHead runs p until its checkpoint reaches the head of the log: under
// Horizon until its status says so, else until it is live.
func runToHead(t *testing.T, f Factory, s *varve.Store, p projection.Projection) {
	t.Helper()
	r, err := projection.NewRunner(s, p, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Horizon {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		<-r.Live()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return
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
