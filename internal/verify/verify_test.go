package verify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/internal/verify"
)

// TestRun: the workload on every backend, with a segmented delivery and
// a projection, finds nothing wrong, and did meet conflicts (the writers
// share streams); both consumers handled every event.
func TestRun(t *testing.T) {
	for _, k := range teststore.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			s := k.Open(t, varve.Config{})
			res, err := verify.Run(t.Context(), s, verify.Config{Writers: 3, Streams: 4, Appends: 40, Seed: 7,
				DeliverySegments: 3, LeaseTTL: time.Second, Projection: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d events, %d delivered (%d again), %d projected, %d consumer restarts", k.Name, res.Events, res.Delivered, res.Redelivered, res.Projected, res.ConsumerRestarts)
			if !res.OK() {
				t.Fatalf("anomalies on %s (seed %d):\n%s", k.Name, res.Seed, strings.Join(res.Anomalies, "\n"))
			}
			if res.Acknowledged == 0 || res.Refused == 0 || res.Events == 0 || res.ReaderEvents < res.Events ||
				len(res.NotRun) > 0 || res.Delivered < res.Events || res.Projected != res.Events {
				t.Fatalf("a run that proves little: %+v", res)
			}
		})
	}
}

// bare hides every capability of the backend it wraps.
type bare struct{ varve.Backend }

// TestRunWithoutLeases: on a store without leases the delivery does not
// run, and the Result says why; the projection, whose checkpoint is in
// memory, runs all the same.
func TestRunWithoutLeases(t *testing.T) {
	s, err := varve.New(bare{memory.New()}, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := verify.Run(t.Context(), s, verify.Config{Writers: 2, Streams: 2, Appends: 20, Seed: 1, DeliverySegments: 2, Projection: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || len(res.NotRun) != 1 || !strings.Contains(res.NotRun[0], "leases") || res.Delivered != 0 || res.Projected != res.Events {
		t.Fatalf("want the delivery not run for want of leases, the projection run: %+v", res)
	}
}

// history builds a history of appends of one event each to stream "s",
// all acknowledged and in the log in order, read whole by one reader.
func history(n int) verify.History {
	var h verify.History
	var obs verify.Observation
	obs.Reader = "all"
	for i := range n {
		id := uuid.New()
		pos := varve.Position{Seq: uint64(i + 1)}
		h.Appends = append(h.Appends, verify.Append{Stream: "s", IDs: []uuid.UUID{id}, Outcome: verify.Acknowledged, Position: pos})
		h.Log = append(h.Log, varve.RecordedEvent{ID: id, Stream: "s", Version: varve.Version(i + 1), Position: pos})
		obs.IDs = append(obs.IDs, id)
		obs.Positions = append(obs.Positions, pos)
	}
	h.Observations = []verify.Observation{obs}
	h.Delivery = &verify.Consumed{Consumer: "delivery", Name: "d", Segments: 1}
	h.Projection = &verify.Consumed{Consumer: "projection", Name: "p"}
	for _, e := range h.Log {
		h.Delivery.Handled = append(h.Delivery.Handled, verify.Handled{ID: e.ID, Position: e.Position, By: "d"})
		h.Projection.Handled = append(h.Projection.Handled, verify.Handled{ID: e.ID, Position: e.Position})
	}
	return h
}

// TestCheck: each kind of loss, duplicate and reordering is found in a
// history made by hand, and a clean history has none.
func TestCheck(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(h *verify.History)
		want   string // in an anomaly; "" for none
	}{
		{"clean", func(*verify.History) {}, ""},
		{"a lost acknowledged append", func(h *verify.History) {
			h.Log = append(h.Log[:2], h.Log[3:]...)
			for i := 2; i < len(h.Log); i++ {
				h.Log[i].Version--
			}
			h.Observations[0].IDs = h.Observations[0].IDs[:2]
		}, "lost"},
		{"a duplicate", func(h *verify.History) {
			d := h.Log[1]
			d.Position = varve.Position{Seq: 100}
			d.Version = 6
			h.Log = append(h.Log, d)
		}, "again"},
		{"a refused append stored", func(h *verify.History) { h.Appends[1].Outcome = verify.Refused }, "refused"},
		{"an unknown append stored is fine", func(h *verify.History) { h.Appends[1].Outcome = verify.Unknown }, ""},
		{"a gap in versions", func(h *verify.History) { h.Log[3].Version = 9; h.Log[4].Version = 10 }, "version 9"},
		{"positions out of order", func(h *verify.History) { h.Log[2].Position = varve.Position{Seq: 1} }, "position"},
		{"a reader skipped an event", func(h *verify.History) {
			o := &h.Observations[0]
			o.IDs = append(o.IDs[:1:1], o.IDs[2:]...)
			o.Positions = append(o.Positions[:1:1], o.Positions[2:]...)
		}, "skipped or reordered"},
		{"a reader stopped short", func(h *verify.History) {
			o := &h.Observations[0]
			o.IDs, o.Positions = o.IDs[:3], o.Positions[:3]
		}, "read 3 of the 5"},
		{"a delivery handed events over again", func(h *verify.History) {
			d := h.Delivery
			d.Handled = append(d.Handled[:4:4], d.Handled[2], d.Handled[3], d.Handled[4])
		}, ""},
		{"a delivery skipped an event", func(h *verify.History) {
			d := h.Delivery
			d.Handled = append(d.Handled[:1:1], d.Handled[2:]...)
		}, "never handed over"},
		{"a delivery out of version order", func(h *verify.History) {
			d := h.Delivery
			d.Handled[1], d.Handled[2] = d.Handled[2], d.Handled[1]
		}, "skipped or reordered"},
		{"a delivery in the wrong segment", func(h *verify.History) { h.Delivery.Segments = 2 }, "belongs to"},
		{"a delivery not caught up", func(h *verify.History) { h.Delivery.Behind = "not through 5" }, "delivery: not through 5"},
		{"a projection skipped an event", func(h *verify.History) {
			p := h.Projection
			p.Handled = append(p.Handled[:1:1], p.Handled[2:]...)
		}, "projection: its event 1"},
		{"a projection applied an event twice", func(h *verify.History) {
			p := h.Projection
			p.Handled = append(p.Handled[:3:3], p.Handled[2], p.Handled[3], p.Handled[4])
		}, "twice"},
		{"a projection stopped short", func(h *verify.History) { h.Projection.Handled = h.Projection.Handled[:4] }, "applied 4 of the 5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := history(5)
			tc.break_(&h)
			r := verify.Check(h)
			if tc.want == "" {
				if !r.OK() {
					t.Fatalf("anomalies in a clean history: %v", r.Anomalies)
				}
				return
			}
			if r.OK() || !strings.Contains(strings.Join(r.Anomalies, "\n"), tc.want) {
				t.Fatalf("want an anomaly with %q, got %v", tc.want, r.Anomalies)
			}
		})
	}
}

// TestRunFindsSkip: consumers that each drop an event handed to them fail
// the check, each with an anomaly of its own.
func TestRunFindsSkip(t *testing.T) {
	s := teststore.Kinds[0].Open(t, varve.Config{})
	cfg := verify.Config{Writers: 2, Streams: 2, Appends: 30, Seed: 3, Run: "skip", DeliverySegments: 2, LeaseTTL: time.Second, Projection: true}
	res, err := verify.Run(t.Context(), s, verify.WithSkip(cfg, 5))
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(res.Anomalies, "\n")
	t.Logf("anomalies:\n%s", all)
	if res.OK() || !strings.Contains(all, "delivery: ") || !strings.Contains(all, "projection: ") {
		t.Fatalf("the check found no skip of each consumer: %+v", res)
	}
}

// TestRunFindsLoss: a store that loses acknowledged appends (its events
// are deleted behind the writers' backs) fails the check.
func TestRunFindsLoss(t *testing.T) {
	s := teststore.Kinds[0].Open(t, varve.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Truncate the run's streams while it writes: acknowledged events
		// leave $all.
		for ctx.Err() == nil {
			page, err := s.Streams().List(ctx, varve.ListQuery{Prefix: "verifylossa"}, false)
			if err == nil {
				for _, info := range page.Streams {
					if info.Version > 1 {
						_ = s.Truncate(ctx, info.Stream, info.Version)
					}
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	res, err := verify.Run(ctx, s, verify.Config{Writers: 2, Streams: 2, Appends: 100, Seed: 3, Run: "loss"})
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || !strings.Contains(strings.Join(res.Anomalies, "\n"), "lost") {
		t.Fatalf("the check found no loss: %+v", res)
	}
}
