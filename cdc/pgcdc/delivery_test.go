package pgcdc_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/cdc/pgcdc"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/subscription"
)

// cdcDelivery is one run of the route from a table to a sink: the slot is
// pumped into per-row streams of a memory store, and a dispatcher delivers
// them to a sink that takes latency per event, in order per row.
type cdcDelivery struct {
	events    int // events the table's changes make
	delivered atomic.Int64
	done      chan struct{}

	mu        sync.Mutex
	last      map[string]varve.Version
	outOfTurn []string
}

// setupAccounts creates schema.accounts with keys rows, a publication and a
// slot, then commits txs transactions of perTx updates of random rows.
// It returns the number of changes.
func setupAccounts(ctx context.Context, conn *pgx.Conn, schema string, keys, txs, perTx int) (int, error) {
	for _, sql := range []string{
		"CREATE SCHEMA " + schema,
		"CREATE TABLE " + schema + ".accounts (id int PRIMARY KEY, balance bigint NOT NULL)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return 0, err
		}
	}
	if _, err := pgcdc.EnsurePublication(ctx, conn, schema, []string{schema + ".accounts"}); err != nil {
		return 0, err
	}
	if _, err := pgcdc.EnsureSlot(ctx, conn, schema); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+schema+".accounts SELECT i, 0 FROM generate_series(1, $1::int) AS i", keys); err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range txs {
		b := &pgx.Batch{}
		for range perTx {
			b.Queue("UPDATE "+schema+".accounts SET balance = balance + 1 WHERE id = $1", 1+rng.IntN(keys))
		}
		if err := conn.SendBatch(ctx, b).Close(); err != nil { // one implicit transaction
			return 0, err
		}
	}
	return keys + txs*perTx, nil
}

// run captures and delivers until every change was delivered once.
func (r *cdcDelivery) run(ctx context.Context, url, slot string, concurrency int, latency time.Duration) error {
	r.done, r.last = make(chan struct{}), map[string]varve.Version{}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		return err
	}
	defer store.Close()
	s, err := pgcdc.Start(ctx, pgcdc.Config{ConnString: url, Slot: slot, Publication: slot, Logger: quiet})
	if err != nil {
		return err
	}
	defer s.Close()
	sub, err := subscription.Open(ctx, store, subscription.Config{Name: "cdc"})
	if err != nil {
		return err
	}
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		select {
		case <-time.After(latency):
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
		if d.Event.Version != r.last[d.Event.Stream]+1 {
			r.outOfTurn = append(r.outOfTurn, fmt.Sprintf("%s version %d after %d", d.Event.Stream, d.Event.Version, r.last[d.Event.Stream]))
		}
		r.last[d.Event.Stream] = d.Event.Version
		r.mu.Unlock()
		if int(r.delivered.Add(1)) == r.events {
			close(r.done)
		}
		return nil
	})
	d, err := delivery.New(sub, sink, delivery.Config{Concurrency: concurrency, Ordering: delivery.PerStream, Logger: quiet})
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, 2)
	go func() { errs <- pgcdc.Pump(rctx, s, store, pgcdc.StoreConfig{Layout: pgcdc.PerRow, Namespace: slot}) }()
	go func() { errs <- d.Run(rctx) }()
	select {
	case <-r.done:
	case err := <-errs:
		return fmt.Errorf("pump or dispatcher ended early: %v", err)
	case <-ctx.Done():
		return ctx.Err()
	}
	stop()
	for range 2 {
		if err := <-errs; err != nil && rctx.Err() == nil {
			return err
		}
	}
	return nil
}

func TestDeliveryFromCapturedStreams(t *testing.T) {
	f := newFixture(t)
	schema := f.name + "_acc"
	events, err := setupAccounts(context.Background(), f.conn, schema, 20, 50, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = pgcdc.DropSlot(ctx, f.conn, schema)
		_ = pgcdc.DropPublication(ctx, f.conn, schema)
		_, _ = f.conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := &cdcDelivery{events: events}
	if err := r.run(ctx, f.url, schema, 8, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if len(r.outOfTurn) > 0 {
		t.Errorf("out of order per row: %v", r.outOfTurn)
	}
	total := varve.Version(0)
	for _, v := range r.last {
		total += v
	}
	if len(r.last) != 20 || int(total) != events {
		t.Errorf("delivered %d events over %d row streams, want %d over 20", total, len(r.last), events)
	}
}

// BenchmarkDeliveryFromCDC is seed 002's matrix on captured data: a table
// of 4·C rows takes transactions of 4 updates of random rows; one slot is
// pumped into per-row streams and a dispatcher of concurrency C delivers
// them in order per row to a sink that takes L = 50ms per event. It
// reports events/s and the efficiency, events/s ÷ (C/L), from the start of
// the capture to the last delivery.
func BenchmarkDeliveryFromCDC(b *testing.B) {
	const latency = 50 * time.Millisecond
	url := cluster.URL(b)
	for _, c := range []int{25, 50, 100, 250} {
		b.Run(fmt.Sprintf("C=%d/L=50ms", c), func(b *testing.B) {
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(ctx)
			// About 4 seconds of ideal delivery per run.
			keys := 4 * c
			txs := (c*80 - keys) / 4
			var elapsed time.Duration
			var n int
			for b.Loop() {
				// A slot and table of its own per run (the run acknowledges
				// what it delivered); only the run itself is timed.
				schema := fmt.Sprintf("cdc_deliver_%d", seq.Add(1))
				events, err := setupAccounts(ctx, conn, schema, keys, txs, 4)
				if err != nil {
					b.Fatal(err)
				}
				r := &cdcDelivery{events: events}
				start := time.Now()
				err = r.run(ctx, url, schema, c, latency)
				elapsed += time.Since(start)
				n += events
				dctx, cancel := context.WithTimeout(ctx, time.Minute)
				_ = pgcdc.DropSlot(dctx, conn, schema)
				_ = pgcdc.DropPublication(dctx, conn, schema)
				_, _ = conn.Exec(dctx, "DROP SCHEMA "+schema+" CASCADE")
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if len(r.outOfTurn) > 0 {
					b.Fatalf("out of order per row: %v", r.outOfTurn[:min(5, len(r.outOfTurn))])
				}
			}
			rate := float64(n) / elapsed.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(rate/(float64(c)/latency.Seconds()), "efficiency")
		})
	}
}
