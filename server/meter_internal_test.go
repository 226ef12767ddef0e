package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// TestMeter counts the appends, events and read pages of a real store of
// each kind, a conflict as a failed append; the dashboard's own reads are
// left out; a take starts it afresh.
func TestMeter(t *testing.T) {
	for _, k := range teststore.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			m := NewMeter()
			store := k.Open(t, varve.Config{Tracer: m})
			ctx := t.Context()
			start := time.Now()
			ev := func() varve.Event { return varve.NewEvent("E", []byte(`{"n":1}`)) }
			if _, err := store.Append(ctx, "s", varve.NoStream, ev(), ev()); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Append(ctx, "s", varve.Exact(2), ev()); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Append(ctx, "s", varve.Exact(1), ev()); !errors.Is(err, varve.ErrWrongExpectedVersion) {
				t.Fatalf("a conflict: %v", err)
			}
			for _, err := range store.ReadAll(ctx, varve.Start) {
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, err := range store.ReadAll(context.WithValue(ctx, unmetered{}, true), varve.Start) {
				if err != nil {
					t.Fatal(err)
				}
			}
			got := m.take(time.Now())
			if got.Appends != 3 || got.AppendErrors != 1 || got.Events != 3 || got.ReadPages != 1 {
				t.Fatalf("counted %+v, want 3 appends (1 failed), 3 events, 1 page", got)
			}
			if got.P50 == nil || got.P99 == nil || *got.P50 < 1 || *got.P50 > *got.P99 || *got.P99 > time.Since(start).Microseconds() {
				t.Fatalf("latencies p50 %v p99 %v", got.P50, got.P99)
			}
			if got.Seconds <= 0 || got.AppendsPerSec != 3/got.Seconds {
				t.Fatalf("rates over %v s: %+v", got.Seconds, got)
			}
			if again := m.take(time.Now()); again.Appends != 0 || again.ReadPages != 0 || again.P50 != nil {
				t.Fatalf("after a take: %+v", again)
			}
		})
	}
}
