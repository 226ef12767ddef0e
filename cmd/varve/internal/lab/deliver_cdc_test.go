package lab

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/internal/pgcluster"
	"github.com/varve-go/varve/internal/testenv"
)

// logicalURL returns VARVE_PG_LOGICAL_URL or starts a private cluster with
// wal_level=logical for the test.
func logicalURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("VARVE_PG_LOGICAL_URL"); u != "" {
		return u
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Logical())
	if err != nil {
		if testenv.CI() {
			t.Fatalf("private PostgreSQL with wal_level=logical: %v", err)
		}
		t.Skipf("private PostgreSQL with wal_level=logical: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c.URL()
}

// TestDeliverBenchCDC runs a tiny matrix from captured writes on both
// routes and checks that every change was delivered, in order per row, by
// every run (each run captures the slot, or a copy of it, anew), and that
// the slots, publication and table are gone afterwards; it measures
// nothing.
func TestDeliverBenchCDC(t *testing.T) {
	url := logicalURL(t)
	ctx := context.Background()
	rs, err := DeliverBench(ctx, DeliverConfig{
		Transactions: 40, EventsPerTx: 3, Streams: 8, Seed: 1,
		Latencies: []time.Duration{time.Millisecond}, Workers: []int{1, 4},
		Ordering: delivery.PerStream, Sinks: []string{"http", "func"}, CheckpointInterval: 10 * time.Millisecond,
		Source: SourceCDC, CDCURL: url, CDCRoutes: []string{RouteDirect, RouteStore},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 8 {
		t.Fatalf("%d results, want 8", len(rs))
	}
	routes := map[string]int{}
	for _, r := range rs {
		routes[r.Route]++
		if r.Events != 120 || r.Delivered != 120 || r.Stopped != "budget" || r.Efficiency <= 0 || r.OrderViolations != 0 || r.Parked != 0 {
			t.Errorf("result %+v", r)
		}
		if r.Sink == "http" && r.Requests != 120 {
			t.Errorf("http: %d requests, want 120", r.Requests)
		}
	}
	if routes[RouteDirect] != 4 || routes[RouteStore] != 4 {
		t.Errorf("runs per route %v, want 4 each", routes)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'varve_deliver_%')
		+ (SELECT count(*) FROM pg_publication WHERE pubname LIKE 'varve_deliver_%')
		+ (SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'varve_deliver_%')`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d slots, publications or schemas left behind", left)
	}

	if _, err := DeliverBench(ctx, DeliverConfig{Transactions: 1, EventsPerTx: 1, Streams: 1, Latencies: []time.Duration{time.Millisecond},
		Workers: []int{1}, Source: SourceCDC, CDCURL: testenv.PostgresURL(t)}); err == nil {
		t.Errorf("a server with wal_level=replica was accepted")
	}
}
