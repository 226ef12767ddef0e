package otelvarve

import (
	"context"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/internal/teststore"
)

// storeHas reports which capabilities a Store found, a bit each.
func storeHas(s *varve.Store) uint {
	var mask uint
	for i, ok := range []bool{
		s.Capabilities().Snapshots, s.Capabilities().Checkpoints, s.Capabilities().Watch,
		s.Capabilities().ListStreams, s.Capabilities().ListCheckpoints, s.Capabilities().Filter, s.Capabilities().MultiAppend, s.Capabilities().Tags, s.Capabilities().Leases,
	} {
		if ok {
			mask |= 1 << i
		}
	}
	return mask
}

// bare hides every optional capability of the backend it embeds.
type bare struct{ varve.Backend }

// unwrapping is a decorator that lets the capabilities of its backend
// through.
type unwrapping struct{ varve.Backend }

func (u unwrapping) Unwrap() varve.Backend { return u.Backend }

// TestTracerHidesNothingAndAddsNothing: a Store with the tracer over a
// backend without capabilities finds none, and over a memory backend, also
// under a decorator, all of them.
func TestTracerHidesNothingAndAddsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    varve.Backend
		want uint
	}{
		{"bare", bare{memory.New()}, 0},
		{"memory", memory.New(), 1<<9 - 1},
		{"under a decorator", unwrapping{memory.New()}, 1<<9 - 1},
	} {
		s, err := varve.New(tc.b, varve.Config{Tracer: NewTracer()})
		if err != nil {
			t.Fatal(err)
		}
		if got := storeHas(s); got != tc.want {
			t.Errorf("%s: the Store finds capabilities %#x, want %#x", tc.name, got, tc.want)
		}
		s.Close()
	}
}

// TestCapabilitiesWithTracerOnEveryBackend compares the capabilities a
// Store finds on each backend with and without the tracer, and uses each
// through the traced Store.
func TestCapabilitiesWithTracerOnEveryBackend(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		plain, err := varve.New(k.Backend(t), varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		want := storeHas(plain)
		plain.Close()
		if want == 0 {
			t.Fatalf("%s has no capability: the test proves nothing", k.Name)
		}
		s, err := varve.New(k.Backend(t), varve.Config{Tracer: NewTracer()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := storeHas(s); got != want {
			t.Fatalf("traced %s: the Store finds capabilities %#x, the backend has %#x", k.Name, got, want)
		}
		if want&1 != 0 {
			snap := varve.Snapshot{Stream: "caps-snap", Version: 3, SchemaVersion: 1, Data: []byte(`{"n":3}`), TakenAt: time.Now().UTC()}
			if err := s.Snapshots().Save(ctx, snap); err != nil {
				t.Fatal(err)
			}
			got, ok, err := s.Snapshots().Load(ctx, "caps-snap")
			if err != nil || !ok || got.Version != 3 || string(got.Data) != `{"n":3}` {
				t.Fatalf("snapshot through the traced store: %+v %v %v", got, ok, err)
			}
		}
		if want&2 != 0 {
			if err := s.Checkpoints().Save(ctx, "caps-cp", varve.Position{Seq: 7}); err != nil {
				t.Fatal(err)
			}
			pos, ok, err := s.Checkpoints().Load(ctx, "caps-cp")
			if err != nil || !ok || pos != (varve.Position{Seq: 7}) {
				t.Fatalf("checkpoint through the traced store: %v %v %v", pos, ok, err)
			}
		}
		var wake <-chan struct{}
		if want&4 != 0 {
			wake = s.Watch()
		}
		if _, err := s.Append(ctx, "caps-stream", varve.NoStream, varve.NewEvent("t", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
		if wake != nil {
			select {
			case <-wake:
			case <-time.After(time.Minute): // a bound on a hang, not a timing assertion
				t.Fatal("Watch through the traced store never woke up after an append")
			}
		}
		if want&8 != 0 {
			page, err := s.Streams().List(ctx, varve.ListQuery{Prefix: "caps-"}, false)
			if err != nil || len(page.Streams) != 1 || page.Streams[0].Stream != "caps-stream" {
				t.Fatalf("stream list through the traced store: %+v %v", page, err)
			}
		}
		if want&16 != 0 {
			page, err := s.Checkpoints().List(ctx, varve.ListQuery{Prefix: "caps-"})
			if err != nil || len(page.Checkpoints) != 1 || page.Checkpoints[0].Name != "caps-cp" {
				t.Fatalf("checkpoint list through the traced store: %+v %v", page, err)
			}
		}
	})
}
