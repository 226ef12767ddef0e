package otelvarve

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
)

// TestProjectionMetrics: a projection's runner's status is exported: the
// events handled, its state (live once it reached the head), and a lag of
// the events appended while it was paused.
func TestProjectionMetrics(t *testing.T) {
	tel := newTelemetry(t)
	s := teststore.Kinds[0].Open(t, varve.Config{})
	ctx := context.Background()
	for range 5 {
		if _, err := s.Append(ctx, "acct-1", varve.Any, varve.NewEvent("Deposited", nil)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := projection.NewRunner(s, projection.Projection{Name: "balances", Version: 2,
		Handle: func(context.Context, projection.Batch) error { return nil }},
		projection.Config{MinPoll: time.Millisecond, MaxPoll: 10 * time.Millisecond, ControlPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := ObserveProjection(s, r, tel.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-r.Live():
	case <-time.After(time.Minute): // a bound on a hang
		t.Fatal("the runner did not go live")
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a bound on a hang
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	who := map[attribute.Key]string{AttrProjection: "balances", AttrProjectionVersion: "2"}
	waitUntil("5 events handled", func() bool { return sum(t, tel.collect(t), "varve.projection.events.handled", who) == 5 })
	live := map[attribute.Key]string{AttrProjection: "balances", AttrState: "live"}
	if v := sum(t, tel.collect(t), "varve.projection.state", live); v != 1 {
		t.Errorf("state live = %d, want 1", v)
	}
	r.Pause()
	waitUntil("paused", func() bool { return r.Status().State == projection.Paused })
	var last varve.Position
	for range 3 {
		res, err := s.Append(ctx, "acct-1", varve.Any, varve.NewEvent("Deposited", nil))
		if err != nil {
			t.Fatal(err)
		}
		last = res.Position
	}
	readable(t, s, last)
	ms := tel.collect(t)
	if lag := sum(t, ms, "varve.consumer.lag", who); lag != 3 {
		t.Errorf("lag while paused: %d, want 3", lag)
	}
	if v := sum(t, ms, "varve.projection.state", map[attribute.Key]string{AttrProjection: "balances", AttrState: "paused"}); v != 1 {
		t.Errorf("state paused = %d, want 1", v)
	}
	r.Resume()
	waitUntil("8 events handled", func() bool { return sum(t, tel.collect(t), "varve.projection.events.handled", who) == 8 })
}
