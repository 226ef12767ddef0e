package backendtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// Factory opens backends for the suite.
type Factory struct {
	// New opens a backend for one test. It is called once or more per test,
	// from parallel tests; the test closes what it gets. Backends from one
	// Factory may share a server and its data.
	New func(t testing.TB) varve.Backend
	// Reopen opens another backend over the data of b, as a second process
	// would: the same file, schema or stream. The Churn behaviour's reopening
	// reader uses it. Nil means that New already does so, as it does for
	// backends on a server; the suite checks that it does.
	Reopen func(t testing.TB, b varve.Backend) varve.Backend
	// Capabilities are those the backend declares. The suite fails when a
	// store over the backend lacks one of them; the behaviours of a
	// capability the backend does not declare, and lacks, are skipped.
	Capabilities varve.Capabilities
	// Settle, when set, finishes the storage work that a burst of writes
	// left behind (a checkpoint, a vacuum). RunLogScale calls it after
	// filling the log to a size, before it measures there.
	Settle func(ctx context.Context, b varve.Backend) error
}

// Run runs the conformance suite against the factory's backends.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"Capabilities", testCapabilities},
		{"AppendAndRead", testAppendAndRead},
		{"ExpectedVersion", testExpectedVersion},
		{"AtomicBatch", testAtomicBatch},
		{"IdempotentAppend", testIdempotentAppend},
		{"UniqueEventIDs", testUniqueEventIDs},
		{"ReadPaged", testReadPaged},
		{"ReadLongStream", testReadLongStream},
		{"ReadAllOrder", testReadAllOrder},
		{"ReadAllBackward", testReadAllBackward},
		{"WaitFor", testWaitFor},
		{"PageBytes", testPageBytes},
		{"FilteredRead", testFilteredRead},
		{"MultiAppend", testMultiAppend},
		{"DCB", testDCB},
		{"PositionNumbers", testPositionNumbers},
		{"Leases", testLeases},
		{"LeaseFence", testLeaseFence},
		{"Keys", testKeys},
		{"Shredding", testShredding},
		{"LastPosition", testLastPosition},
		{"StreamInfo", testStreamInfo},
		{"Truncate", testTruncate},
		{"Delete", testDelete},
		{"Tombstone", testTombstone},
		{"BadInput", testBadInput},
		{"ErrorsNameStreamOnce", testErrorsNameStreamOnce},
		{"ClosedStore", testClosed},
		{"CloseDuringRead", testCloseDuringRead},
		{"CancelledContext", testCancelled},
		{"ConcurrentSameStream", testConcurrentSameStream},
		{"ConcurrentManyStreams", testConcurrentManyStreams},
		{"CatchUp", testCatchUp},
		{"Snapshots", testSnapshots},
		{"SnapshotRead", testSnapshotRead},
		{"Checkpoints", testCheckpoints},
		{"ListStreams", testListStreams},
		{"ListCheckpoints", testListCheckpoints},
		{"Watch", testWatch},
		{"Churn", testChurn},
		{"Retention", testRetention},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Churn and PageBytes run alone, before the others start: the
			// tens of thousands of events of one and the megabytes of the
			// other would otherwise lie in the log that the others scan (a
			// minute more under the race detector), and the others would
			// slow them.
			if tc.name != "Churn" && tc.name != "PageBytes" {
				t.Parallel()
			}
			tc.fn(t, f)
		})
	}
}

// testCapabilities fails when the store lacks a capability the factory
// declares, so that a backend that loses one fails the suite instead of
// skipping that capability's behaviours.
func testCapabilities(t *testing.T, f Factory) {
	s := store(t, f)
	have := s.Capabilities()
	if missing := missing(have, f.Capabilities); missing != nil {
		t.Errorf("the backend declares capabilities %v that a store over it lacks (it has %+v)", missing, have)
	}
	t.Logf("%s: %+v", s.Features().Name, have)
}

// lacks reports whether s lacks the capabilities of want, whose behaviours
// the caller then skips; it fails the test when the factory declares them.
func lacks(t *testing.T, f Factory, s *varve.Store, want varve.Capabilities) bool {
	t.Helper()
	lost := missing(s.Capabilities(), want)
	if lost != nil && missing(f.Capabilities, want) == nil {
		t.Fatalf("the backend declares %v, which a store over it lacks", lost)
	}
	return lost != nil
}

// missing returns the names of the capabilities that want has and have
// lacks, in the order of the fields; nil when have has them all.
func missing(have, want varve.Capabilities) []string {
	h, w := reflect.ValueOf(have), reflect.ValueOf(want)
	var out []string
	for i := range w.NumField() {
		if w.Field(i).Bool() && !h.Field(i).Bool() {
			out = append(out, w.Type().Field(i).Name)
		}
	}
	return out
}

// store opens a store over a new backend, closed when the test ends.
func store(t testing.TB, f Factory) *varve.Store {
	t.Helper()
	s, err := varve.New(f.New(t), varve.Config{})
	if err != nil {
		t.Fatalf("varve.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// reopen opens another backend over the data of s's backend, with
// Factory.Reopen or, when that is nil, Factory.New, and checks that it sees
// stream, which s has written.
func reopen(t testing.TB, f Factory, s *varve.Store, stream string) (varve.Backend, error) {
	var b varve.Backend
	if f.Reopen != nil {
		b = f.Reopen(t, s.Backend())
	} else {
		b = f.New(t)
	}
	if _, err := b.StreamInfo(ctxFor(t), stream); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("a backend reopened from the factory does not see stream %q (%w): "+
			"when Factory.New opens a backend over new data, set Factory.Reopen", stream, err)
	}
	return b, nil
}

// prefix returns a stream-name prefix unique to this test run.
func prefix(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := t.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if len(name) > 40 {
		name = name[:40]
	}
	return "bt-" + name + "-" + hex.EncodeToString(b[:]) + "-"
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func events(typ string, n int) []varve.Event {
	evs := make([]varve.Event, n)
	for i := range evs {
		evs[i] = varve.Event{
			ID:       varve.NewEventID(),
			Type:     typ,
			Data:     fmt.Appendf(nil, `{"n":%d}`, i),
			Metadata: []byte(`{"by":"backendtest"}`),
		}
	}
	return evs
}

func mustAppend(t testing.TB, s *varve.Store, stream string, exp varve.ExpectedVersion, evs ...varve.Event) varve.AppendResult {
	t.Helper()
	res, err := s.Append(ctxFor(t), stream, exp, evs...)
	if err != nil {
		t.Fatalf("append %d events to %q at %s: %v", len(evs), stream, exp, err)
	}
	return res
}

func collect(seq iter.Seq2[varve.RecordedEvent, error]) ([]varve.RecordedEvent, error) {
	var out []varve.RecordedEvent
	for e, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

func mustRead(t testing.TB, s *varve.Store, stream string, opts ...varve.StreamOption) []varve.RecordedEvent {
	t.Helper()
	evs, err := collect(s.ReadStream(ctxFor(t), stream, opts...))
	if err != nil {
		t.Fatalf("read %q: %v", stream, err)
	}
	return evs
}

// readAllPrefix reads $all after pos and keeps the events of streams with
// the given prefix.
func readAllPrefix(t testing.TB, s *varve.Store, after varve.Position, pfx string) []varve.RecordedEvent {
	t.Helper()
	var out []varve.RecordedEvent
	last := after
	for e, err := range s.ReadAll(ctxFor(t), after, varve.PageSize(100)) {
		if err != nil {
			t.Fatalf("read $all: %v", err)
		}
		if !last.Less(e.Position) {
			t.Fatalf("$all not in position order: %s after %s", e.Position, last)
		}
		last = e.Position
		if strings.HasPrefix(e.Stream, pfx) {
			out = append(out, e)
		}
	}
	return out
}

func versions(evs []varve.RecordedEvent) []varve.Version {
	vs := make([]varve.Version, len(evs))
	for i, e := range evs {
		vs[i] = e.Version
	}
	return vs
}

func seqVersions(from, to varve.Version) []varve.Version {
	var vs []varve.Version
	if from <= to {
		for v := from; v <= to; v++ {
			vs = append(vs, v)
		}
	} else {
		for v := from; v >= to; v-- {
			vs = append(vs, v)
		}
	}
	return vs
}

func equalVersions(a, b []varve.Version) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func wantNotFound(t testing.TB, s *varve.Store, stream string) {
	t.Helper()
	_, err := collect(s.ReadStream(ctxFor(t), stream))
	wantErr(t, "read "+stream, err, varve.ErrStreamNotFound)
}

func sameEvent(t testing.TB, got varve.RecordedEvent, want varve.Event) {
	t.Helper()
	if got.ID != want.ID || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Metadata, want.Metadata) {
		t.Fatalf("event differs:\n got  %s %s %q %q\n want %s %s %q %q",
			got.ID, got.Type, got.Data, got.Metadata, want.ID, want.Type, want.Data, want.Metadata)
	}
}

var nilID uuid.UUID
