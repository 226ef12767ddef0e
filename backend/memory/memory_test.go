package memory_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/memory"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Factory{
		New:    func(testing.TB) varve.Backend { return memory.New() },
		Reopen: func(_ testing.TB, b varve.Backend) varve.Backend { return handle{b.(*memory.Backend)} },
		Capabilities: varve.Capabilities{Watch: true, Filter: true, Tags: true, PositionNumbers: true, MultiAppend: true, Snapshots: true,
			Checkpoints: true, ListCheckpoints: true, ListStreams: true, Leases: true, Keys: true},
	})
}

// handle is another opening of a memory backend: its data lives in the
// Backend value, so a second handle on it, whose Close leaves it open, is
// what reopening the store means.
type handle struct{ *memory.Backend }

func (handle) Close() error { return nil }

// TestFingerprintCollisions: ids whose fingerprints collide (the same bits
// flipped in both halves) are still told apart, by retries, duplicate checks
// and truncation alike.
func TestFingerprintCollisions(t *testing.T) {
	ctx := t.Context()
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Past the length from which ids are indexed, with descending ids: a
	// stream whose ids ascend needs no index.
	filler := make([]varve.Event, 20)
	for i := range filler {
		filler[i] = varve.Event{ID: uuid.UUID{0xff, 15: byte(100 - i)}, Type: "Fill"}
	}
	if _, err := s.Append(ctx, "c", varve.NoStream, filler...); err != nil {
		t.Fatal(err)
	}
	a := varve.NewEventID()
	b := a
	b[0] ^= 0x5a
	b[8] ^= 0x5a // same fingerprint as a, different id
	ra, err := s.Append(ctx, "c", varve.Any, varve.Event{ID: a, Type: "A"})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := s.Append(ctx, "c", varve.Any, varve.Event{ID: b, Type: "B"})
	if err != nil || rb.LastVersion != ra.LastVersion+1 {
		t.Fatalf("an id colliding with another is not a duplicate: %+v %v", rb, err)
	}
	for _, tc := range []struct {
		id   [16]byte
		want varve.AppendResult
	}{{a, ra}, {b, rb}} {
		got, err := s.Append(ctx, "c", varve.Any, varve.Event{ID: tc.id, Type: "Retry"})
		if err != nil || got != tc.want {
			t.Fatalf("retry of %x: %+v %v, want %+v", tc.id, got, err, tc.want)
		}
	}
	c := varve.NewEventID()
	if _, err := s.Append(ctx, "c", varve.Any, varve.Event{ID: c, Type: "C"}, varve.Event{ID: a, Type: "A again"}); !errors.Is(err, varve.ErrDuplicateEvent) {
		t.Fatalf("a known id later in a batch: %v", err)
	}
	// Truncating a away keeps b findable, and a becomes new to the stream.
	if err := s.Truncate(ctx, "c", rb.LastVersion); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Append(ctx, "c", varve.Any, varve.Event{ID: b, Type: "Retry"}); err != nil || got != rb {
		t.Fatalf("retry of b after a was truncated: %+v %v", got, err)
	}
	if got, err := s.Append(ctx, "c", varve.Any, varve.Event{ID: a, Type: "A anew"}); err != nil || got.LastVersion != rb.LastVersion+1 {
		t.Fatalf("a after it was truncated: %+v %v", got, err)
	}
}

// Retries, duplicates and truncation behave the same whatever the order of
// a stream's ids: ascending (found by binary search, no index), random,
// descending, or ascending until one is not (the index is built then).
func TestIDOrders(t *testing.T) {
	const n = 40
	asc := func() []uuid.UUID {
		ids := make([]uuid.UUID, n)
		for i := range ids {
			ids[i] = varve.NewEventID()
		}
		return ids
	}
	cases := []struct {
		name string
		ids  func() []uuid.UUID
	}{
		{"ascending", asc},
		{"random", func() []uuid.UUID {
			ids := make([]uuid.UUID, n)
			for i := range ids {
				ids[i] = uuid.New()
			}
			return ids
		}},
		{"descending", func() []uuid.UUID { ids := asc(); slices.Reverse(ids); return ids }},
		{"ascending, then one earlier", func() []uuid.UUID {
			ids := asc()
			ids[n/2], ids[n/2+1] = ids[n/2+1], ids[n/2]
			return ids
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, err := varve.New(memory.New(), varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ids := tc.ids()
			res := make([]varve.AppendResult, n)
			for i, id := range ids {
				if res[i], err = s.Append(ctx, "o", varve.Any, varve.Event{ID: id, Type: "E"}); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range []int{0, 1, n / 2, n/2 + 1, n - 2, n - 1} {
				if got, err := s.Append(ctx, "o", varve.Any, varve.Event{ID: ids[i], Type: "E"}); err != nil || got != res[i] {
					t.Fatalf("retry of event %d: %+v %v, want %+v", i, got, err, res[i])
				}
				if _, err := s.Append(ctx, "o", varve.Any, varve.Event{ID: varve.NewEventID(), Type: "E"}, varve.Event{ID: ids[i], Type: "E"}); !errors.Is(err, varve.ErrDuplicateEvent) {
					t.Fatalf("event %d's id later in a batch: %v", i, err)
				}
			}
			if err := s.Truncate(ctx, "o", res[n/2].LastVersion); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Append(ctx, "o", varve.Any, varve.Event{ID: ids[n-1], Type: "E"}); err != nil || got != res[n-1] {
				t.Fatalf("retry of the last event after a truncation: %+v %v", got, err)
			}
			got, err := s.Append(ctx, "o", varve.Any, varve.Event{ID: ids[0], Type: "E"})
			if err != nil || got.LastVersion != res[n-1].LastVersion+1 {
				t.Fatalf("a truncated event's id appends anew: %+v %v", got, err)
			}
			if got, err := s.Append(ctx, "o", varve.Any, varve.Event{ID: ids[n/2], Type: "E"}); err != nil || got != res[n/2] {
				t.Fatalf("retry of the first event kept: %+v %v", got, err)
			}
		})
	}
}
