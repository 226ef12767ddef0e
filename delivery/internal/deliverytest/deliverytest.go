// Package deliverytest holds what the tests of package delivery and of its
// sinks share: a store to fill with events and a dispatcher running in the
// background that a test waits for and stops.
package deliverytest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/subscription"
)

// Quiet is a logger that drops everything.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// NewStore returns a memory store, closed when the test ends.
func NewStore(t testing.TB) *varve.Store {
	t.Helper()
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Fill appends n events to streams prefix-0..prefix-(streams-1), picked at
// random, in commits of 1..3 events, and returns the last position.
func Fill(t testing.TB, s *varve.Store, prefix string, streams, n int, seed uint64) varve.Position {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	var last varve.Position
	for n > 0 {
		k := min(n, 1+rng.IntN(3))
		evs := make([]varve.Event, k)
		for i := range evs {
			evs[i] = varve.Event{Type: "Tested", Data: []byte(`{}`)}
		}
		res, err := s.Append(context.Background(), fmt.Sprintf("%s-%d", prefix, rng.IntN(streams)), varve.Any, evs...)
		if err != nil {
			t.Fatal(err)
		}
		last, n = res.Position, n-k
	}
	return last
}

// Running is a dispatcher whose Run runs in the background.
type Running struct {
	D      *delivery.Dispatcher
	cancel context.CancelFunc
	done   chan error
}

// Start opens the subscription name on s and runs a dispatcher of it to
// sink until Stop or the end of the test. A nil cfg.Logger is [Quiet].
func Start(t testing.TB, s *varve.Store, name string, sink delivery.Sink, cfg delivery.Config) *Running {
	t.Helper()
	sub, err := subscription.Open(context.Background(), s, subscription.Config{Name: name, PageSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = Quiet
	}
	d, err := delivery.New(sub, sink, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{D: d, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Wait waits until every event up to pos is delivered or parked; it fails
// the test after 20s.
func (r *Running) Wait(t testing.TB, pos varve.Position) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.D.WaitFor(ctx, pos); err != nil {
		t.Fatalf("wait for checkpoint %v: %v (stats %+v)", pos, err, r.D.Stats())
	}
}

// Stop stops the dispatcher and fails the test if Run failed. It may be
// called more than once.
func (r *Running) Stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("run: %v", err)
	}
}
