package subscription_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// TestDescriptorAndLag: Open records what a subscription reads, once per
// change, and Lag counts by it: a consumer of category order is not behind
// by other categories' events, system streams', or other segments'.
func TestDescriptorAndLag(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, open opener) {
		s := open(t, varve.Config{})
		ctx := t.Context()
		for i := range 3 {
			appendN(t, s, fmt.Sprint("order-", i), "Placed", 1)
		}
		appendN(t, s, "user-1", "Joined", 5)
		last := appendN(t, s, "$parked-x", "Parked", 2)
		// $all may show its newest events a while after their appends
		// (PostgreSQL's horizon): count once it shows them all.
		if err := s.WaitFor(ctx, last); err != nil {
			t.Fatal(err)
		}
		// The log's events, counted: on PostgreSQL the head that
		// LastPosition gives follows a horizon that other clients of the
		// server move, so it does not prove that nothing was appended.
		events := func() int {
			n := 0
			for _, err := range s.ReadAll(ctx, varve.Start) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			return n
		}
		before := events()
		orders := subscription.Config{Name: "orders", Filter: varve.Filter{Categories: []string{"order"}}}
		var saved []time.Time
		for range 2 {
			if _, err := subscription.Open(ctx, s, orders); err != nil {
				t.Fatal(err)
			}
			snap, ok, err := s.Snapshots().Load(ctx, subscription.DescriptorPrefix+"orders")
			if err != nil || !ok {
				t.Fatalf("the descriptor's record: %v %v", ok, err)
			}
			saved = append(saved, snap.TakenAt)
		}
		if !saved[0].Equal(saved[1]) {
			t.Errorf("a second Open of the same config saved the descriptor again: %v", saved)
		}
		if after := events(); after != before {
			t.Errorf("the log held %d events, then %d after the Opens: a descriptor is no event", before, after)
		}
		d, ok, err := subscription.Described(ctx, s, "orders")
		if err != nil || !ok || len(d.Filter.Categories) != 1 || d.Filter.Categories[0] != "order" {
			t.Fatalf("described: %+v %v %v", d, ok, err)
		}
		types := orders
		types.Filter = varve.Filter{Types: []string{"Joined"}}
		if _, err := subscription.Open(ctx, s, types); err != nil {
			t.Fatal(err)
		}
		if d, _, _ = subscription.Described(ctx, s, "orders"); len(d.Filter.Types) != 1 || d.Filter.Categories != nil {
			t.Fatalf("after a change of filter: %+v", d)
		}
		if _, _, err := subscription.Described(ctx, s, "never-opened"); err != nil {
			t.Fatal(err)
		}
		// The log holds only this test's events (a store of its own): 3
		// orders, 5 user events, 2 parked.
		seg := subscription.Descriptor{Segment: subscription.SegmentOf("order-0", 4), Segments: 4}
		wantSeg := 0
		for _, st := range []string{"order-0", "order-1", "order-2", "user-1", "user-1", "user-1", "user-1", "user-1"} {
			if subscription.SegmentOf(st, 4) == seg.Segment {
				wantSeg++
			}
		}
		for _, tc := range []struct {
			name  string
			d     subscription.Descriptor
			limit int
			want  int
			more  bool
		}{
			{"category", subscription.Descriptor{Filter: varve.Filter{Categories: []string{"order"}}}, 100, 3, false},
			{"type", subscription.Descriptor{Filter: varve.Filter{Types: []string{"Joined"}}}, 100, 5, false},
			{"everything but system streams", subscription.Descriptor{}, 100, 8, false},
			{"with system streams", subscription.Descriptor{SystemStreams: true, Filter: varve.Filter{StreamPrefixes: []string{"$parked-"}}}, 100, 2, false},
			{"one stream", subscription.Descriptor{Stream: "order-1"}, 100, 1, false},
			{"a segment", seg, 100, wantSeg, false},
			{"over the limit", subscription.Descriptor{}, 4, 4, true},
			{"at the limit", subscription.Descriptor{Filter: varve.Filter{Categories: []string{"order"}}}, 3, 3, false},
		} {
			n, more, err := subscription.Lag(ctx, s, varve.Start, tc.d, tc.limit)
			if err != nil || n != tc.want || more != tc.more {
				t.Errorf("%s: lag %d (more %v) %v, want %d (more %v)", tc.name, n, more, err, tc.want, tc.more)
			}
		}
	})
}

// TestLagScanBound: Lag stops reading after limit×LagScanFactor events (at
// least 1,000) that it does not count, and says there may be more.
func TestLagScanBound(t *testing.T) {
	s := newStore(t, false)
	ctx := t.Context()
	events := make([]varve.Event, 1100)
	for i := range events {
		events[i] = varve.Event{Type: "Parked"}
	}
	if _, err := s.System().Append(ctx, "$parked-many", varve.Any, events...); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "order-1", "Placed", 1)
	if n, more, err := subscription.Lag(ctx, s, varve.Start, subscription.Descriptor{}, 10); err != nil || n != 0 || !more {
		t.Errorf("past 1,100 uncounted events with a limit of 10: %d (more %v) %v, want 0 and more", n, more, err)
	}
	if n, more, err := subscription.Lag(ctx, s, varve.Start, subscription.Descriptor{}, 200); err != nil || n != 1 || more {
		t.Errorf("with a limit of 200 (a scan of 1,600): %d (more %v) %v, want 1", n, more, err)
	}
}
