package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

func testAppendAndRead(t *testing.T, f Factory) {
	s := store(t, f)
	stream := prefix(t) + "order-1"
	evs := events("OrderPlaced", 3)
	evs[1].Metadata = nil
	evs[2].Data = nil
	before := time.Now().Add(-time.Minute)
	res := mustAppend(t, s, stream, varve.NoStream, evs...)
	if res.FirstVersion != 1 || res.LastVersion != 3 {
		t.Fatalf("append result versions %d..%d, want 1..3", res.FirstVersion, res.LastVersion)
	}
	got := mustRead(t, s, stream)
	if len(got) != 3 {
		t.Fatalf("read %d events, want 3", len(got))
	}
	for i, e := range got {
		sameEvent(t, e, evs[i])
		if e.Stream != stream || e.Version != varve.Version(i+1) {
			t.Fatalf("event %d: stream %q version %d", i, e.Stream, e.Version)
		}
		if e.RecordedAt.Before(before) || e.RecordedAt.After(time.Now().Add(time.Minute)) {
			t.Fatalf("event %d: recorded at %v, not about now", i, e.RecordedAt)
		}
		if i > 0 && !got[i-1].Position.Less(e.Position) {
			t.Fatalf("positions not increasing: %s then %s", got[i-1].Position, e.Position)
		}
		p, err := varve.ParsePosition(e.Position.String())
		if err != nil || p != e.Position {
			t.Fatalf("position %s does not round-trip its text form: %v %v", e.Position, p, err)
		}
	}
	if got[2].Position != res.Position {
		t.Fatalf("append result position %s, last event at %s", res.Position, got[2].Position)
	}
	res2 := mustAppend(t, s, stream, varve.Exact(3), events("OrderShipped", 1)...)
	if res2.FirstVersion != 4 || res2.LastVersion != 4 || !res.Position.Less(res2.Position) {
		t.Fatalf("second append: %+v after %+v", res2, res)
	}
	// A zero id gets a fresh one, written back into the caller's slice.
	fresh := []varve.Event{{Type: "NoID", Data: []byte("x")}}
	mustAppend(t, s, stream, varve.Any, fresh...)
	if fresh[0].ID == nilID || fresh[0].ID.Version() != 7 {
		t.Fatalf("generated id %s is not a UUIDv7", fresh[0].ID)
	}
	last := mustRead(t, s, stream, varve.ReadBackward(), varve.Limit(1))
	if len(last) != 1 || last[0].ID != fresh[0].ID {
		t.Fatalf("stored id differs from the generated one")
	}
}

func testExpectedVersion(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	cases := []struct {
		name     string
		existing int // events in the stream before the append
		expected varve.ExpectedVersion
		ok       bool
	}{
		{"any/new", 0, varve.Any, true},
		{"any/existing", 2, varve.Any, true},
		{"no-stream/new", 0, varve.NoStream, true},
		{"no-stream/existing", 2, varve.NoStream, false},
		{"exists/new", 0, varve.StreamExists, false},
		{"exists/existing", 2, varve.StreamExists, true},
		{"exact/match", 2, varve.Exact(2), true},
		{"exact/behind", 2, varve.Exact(1), false},
		{"exact/ahead", 2, varve.Exact(3), false},
		{"exact/new", 0, varve.Exact(1), false},
		{"exact-zero/new", 0, varve.Exact(0), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stream := pfx + tc.name
			if tc.existing > 0 {
				mustAppend(t, s, stream, varve.NoStream, events("Seed", tc.existing)...)
			}
			res, err := s.Append(ctxFor(t), stream, tc.expected, events("Tried", 2)...)
			if tc.ok {
				if err != nil {
					t.Fatalf("append at %s: %v", tc.expected, err)
				}
				if res.LastVersion != varve.Version(tc.existing+2) {
					t.Fatalf("last version %d, want %d", res.LastVersion, tc.existing+2)
				}
				return
			}
			var wrong *varve.WrongExpectedVersionError
			if !errors.As(err, &wrong) || !errors.Is(err, varve.ErrWrongExpectedVersion) {
				t.Fatalf("append at %s: got %v, want a *WrongExpectedVersionError", tc.expected, err)
			}
			if wrong.Stream != stream || wrong.Expected != tc.expected || wrong.Actual != varve.Version(tc.existing) {
				t.Fatalf("conflict detail %+v, want stream %q expected %s actual %d", *wrong, stream, tc.expected, tc.existing)
			}
			if tc.existing == 0 {
				wantNotFound(t, s, stream)
			} else if n := len(mustRead(t, s, stream)); n != tc.existing {
				t.Fatalf("a failed append changed the stream: %d events, want %d", n, tc.existing)
			}
		})
	}
}

func testAtomicBatch(t *testing.T, f Factory) {
	s := store(t, f)
	stream := prefix(t) + "batch"
	batch := events("Batched", 100)
	res := mustAppend(t, s, stream, varve.NoStream, batch...)
	if res.FirstVersion != 1 || res.LastVersion != 100 {
		t.Fatalf("batch result %+v", res)
	}
	got := mustRead(t, s, stream)
	if len(got) != 100 {
		t.Fatalf("read %d, want 100", len(got))
	}
	for i := range got {
		sameEvent(t, got[i], batch[i])
	}
	// A batch that fails its expectation writes none of its events.
	_, err := s.Append(ctxFor(t), stream, varve.Exact(99), events("Lost", 50)...)
	wantErr(t, "stale batch", err, varve.ErrWrongExpectedVersion)
	if n := len(mustRead(t, s, stream)); n != 100 {
		t.Fatalf("stream has %d events after a failed batch, want 100", n)
	}
}

func testIdempotentAppend(t *testing.T, f Factory) {
	s := store(t, f)
	stream := prefix(t) + "idem"
	first := events("Once", 3)
	orig := mustAppend(t, s, stream, varve.NoStream, first...)
	mustAppend(t, s, stream, varve.Exact(3), events("Later", 2)...)

	for _, exp := range []varve.ExpectedVersion{varve.NoStream, varve.Any, varve.Exact(3), varve.Exact(42), varve.StreamExists} {
		res, err := s.Append(ctxFor(t), stream, exp, first...)
		if err != nil {
			t.Fatalf("retry at %s: %v", exp, err)
		}
		if res != orig {
			t.Fatalf("retry at %s returned %+v, want the original %+v", exp, res, orig)
		}
	}
	// A retry of a prefix of the original append returns that prefix's result.
	res, err := s.Append(ctxFor(t), stream, varve.Any, first[:2]...)
	if err != nil || res.FirstVersion != 1 || res.LastVersion != 2 {
		t.Fatalf("retry of a prefix: %+v %v", res, err)
	}
	if n := len(mustRead(t, s, stream)); n != 5 {
		t.Fatalf("retries wrote events: stream has %d, want 5", n)
	}
	// First id known, but not an exact retry.
	mixed := append([]varve.Event{first[0]}, events("New", 1)...)
	_, err = s.Append(ctxFor(t), stream, varve.Any, mixed...)
	wantErr(t, "known id followed by a new one", err, varve.ErrDuplicateEvent)
	reordered := []varve.Event{first[0], first[2]}
	_, err = s.Append(ctxFor(t), stream, varve.Any, reordered...)
	wantErr(t, "known ids out of order", err, varve.ErrDuplicateEvent)
	if n := len(mustRead(t, s, stream)); n != 5 {
		t.Fatalf("a refused retry wrote events: stream has %d, want 5", n)
	}
	// The same id in another stream is a different event.
	other := prefix(t) + "idem-other"
	if r := mustAppend(t, s, other, varve.NoStream, first[0]); r.LastVersion != 1 {
		t.Fatalf("same id in another stream: %+v", r)
	}
}

func testUniqueEventIDs(t *testing.T, f Factory) {
	s := store(t, f)
	if !s.Features().UniqueEventIDs {
		t.Skipf("backend %q does not declare Features.UniqueEventIDs", s.Features().Name)
	}
	stream := prefix(t) + "unique"
	known := events("Known", 3)
	mustAppend(t, s, stream, varve.NoStream, known...)
	poisoned := events("Poisoned", 20)
	poisoned[13].ID = known[1].ID
	_, err := s.Append(ctxFor(t), stream, varve.Exact(3), poisoned...)
	wantErr(t, "a known id in the middle of a batch", err, varve.ErrDuplicateEvent)
	if got := mustRead(t, s, stream); len(got) != 3 {
		t.Fatalf("a failed batch left %d events, want 3", len(got))
	}
	if info, err := s.StreamInfo(ctxFor(t), stream); err != nil || info.Version != 3 {
		t.Fatalf("stream info after a failed batch: %+v %v", info, err)
	}
}
