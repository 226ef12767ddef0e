package memory_test

import (
	"errors"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/memory"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Factory{
		New:    func(testing.TB) varve.Backend { return memory.New() },
		Reopen: func(_ testing.TB, b varve.Backend) varve.Backend { return handle{b.(*memory.Backend)} },
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
	filler := make([]varve.Event, 20) // past the length from which ids are indexed
	for i := range filler {
		filler[i] = varve.Event{Type: "Fill"}
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
