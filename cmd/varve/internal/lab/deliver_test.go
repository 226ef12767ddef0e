package lab

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve/delivery"
)

// TestDeliverBench runs a tiny matrix of every sink and checks the figures
// are consistent with what was delivered; it measures nothing.
func TestDeliverBench(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		ordering delivery.Ordering
		poison   int
	}{
		{delivery.PerStream, 0},
		{delivery.PerStream, 1},
		{delivery.Unordered, 0},
	} {
		t.Run(tc.ordering.String(), func(t *testing.T) {
			rs, err := DeliverBench(context.Background(), DeliverConfig{
				Transactions: 40, EventsPerTx: 3, Streams: 8, Seed: 1, Poison: tc.poison,
				Latencies: []time.Duration{time.Millisecond}, Workers: []int{1, 4},
				Ordering: tc.ordering, Sinks: []string{"http", "func", "raw-http"}, CheckpointInterval: 10 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 6 {
				t.Fatalf("%d results, want 6", len(rs))
			}
			for _, r := range rs {
				if r.Events != 120 || r.Delivered != 120 || r.Stopped != "budget" || r.Elapsed <= 0 || r.EventsPerS <= 0 || r.Efficiency <= 0 || r.Latency.P50 < time.Millisecond {
					t.Fatalf("result %+v", r)
				}
				if r.Sink == "raw-http" {
					continue
				}
				if tc.poison == 0 && (r.Requests != 120 || r.Parked != 0) {
					t.Fatalf("%s: %d requests, %d parked; want 120 and 0", r.Sink, r.Requests, r.Parked)
				}
				if tc.poison == 1 && r.Parked == 0 {
					t.Fatalf("%s: poison stream not parked: %+v", r.Sink, r)
				}
				if tc.ordering == delivery.PerStream && r.OrderViolations != 0 {
					t.Fatalf("%s: %d order violations in per-stream mode", r.Sink, r.OrderViolations)
				}
			}
			var table, page bytes.Buffer
			if err := PrintDeliverTable(&table, rs); err != nil {
				t.Fatal(err)
			}
			if strings.Count(table.String(), "WORKERS") != 3 {
				t.Fatalf("want a table per sink:\n%s", table.String())
			}
			if err := WriteDeliverHTML(&page, rs); err != nil || !strings.Contains(page.String(), "deliver-bench") {
				t.Fatalf("html: %v", err)
			}
		})
	}
}

func TestStreamVersion(t *testing.T) {
	for _, body := range []string{
		`{"idempotency_key":"s:1","subscription":"s","id":"x","stream":"bench-7","version":12,"position":"1"}`,
		`{"version":12,"stream":"bench-7"}`,
	} {
		s, v, err := streamVersion([]byte(body))
		if err != nil || s != "bench-7" || v != 12 {
			t.Errorf("%s: got %q %d %v", body, s, v, err)
		}
	}
}
