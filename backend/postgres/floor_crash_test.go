package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/internal/pgcluster"
)

// TestFloorAcrossCrash: a backend's floor is a horizon proven on one
// server. A server that crashes forgets the transaction ids it handed out
// without writing them to the WAL (here: transactions that only asked for
// an id, whose commit records were still in the WAL buffers), and hands
// them out again after recovery. A floor kept from before the crash is then
// above the id of a writer in flight, and a reader following $all passed
// over that writer's event.
func TestFloorAcrossCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The WAL writer sleeps 10 s: records no commit flushed stay in the
	// buffers, and an immediate shutdown loses them.
	pc, err := pgcluster.Start(ctx, pgcluster.Config{Settings: map[string]string{"wal_writer_delay": "10000ms"}})
	if err != nil {
		pgcluster.Unavailable(t, "private PostgreSQL server", err, "Install PostgreSQL's server binaries or set VARVE_PG_BINDIR.")
	}
	t.Cleanup(func() { _ = pc.Stop() })
	cfg, err := postgres.ParseURL(pc.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Schema = "floor_crash"
	b := open(t, cfg)
	schema := b.Schema()
	ev := func() []varve.Event { return []varve.Event{varve.NewEvent("E", []byte(`{}`))} }
	res0, err := b.Append(ctx, varve.AppendRequest{Stream: "a-0", Expected: varve.Any, Events: ev(), Category: "a"})
	if err != nil {
		t.Fatal(err)
	}

	// Transactions that only take an id: their commits write no WAL before
	// the commit record and do not flush it.
	raw := testConn(t, pc.URL())
	var last int64
	for range 200 {
		if err := raw.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&last); err != nil {
			t.Fatal(err)
		}
	}
	_ = raw.Close(ctx)
	// A filtered page proves the horizon, above all of them.
	if _, _, err := b.ReadAllFiltered(ctx, varve.FilterQuery{After: res0.Position, Limit: 10,
		Filter: varve.Filter{StreamPrefixes: []string{"none-"}}}, nil); err != nil {
		t.Fatal(err)
	}
	floor := postgres.Floor(b)
	if floor <= last {
		t.Fatalf("floor %d, want above %d", floor, last)
	}

	if err := pc.Restart(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}

	// A writer in flight after recovery.
	w1 := testConn(t, pc.URL())
	tx1, err := w1.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id1 int64
	if err := tx1.QueryRow(ctx, `SELECT o_tx FROM `+schema+`.append('a-1', -1, ARRAY[gen_random_uuid()], ARRAY['E'], ARRAY['{}'::bytea], ARRAY[NULL::bytea], 'a')`).Scan(&id1); err != nil {
		t.Fatal(err)
	}
	if id1 >= floor {
		t.Skipf("the server did not hand out an id below the floor again (writer %d, floor %d)", id1, floor)
	}
	t.Logf("floor %d from before the crash; writer in flight after it: %d", floor, id1)

	// A second writer commits after it; the pool's connections died with
	// the server, so retry until it has new ones.
	retry := func(f func() error) {
		t.Helper()
		for {
			err := f()
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	retry(func() error {
		_, err := b.Append(ctx, varve.AppendRequest{Stream: "a-2", Expected: varve.Any, Events: ev(), Category: "a"})
		return err
	})

	// A reader follows $all: one page while the first writer is in flight,
	// one after it committed.
	seen := map[string]bool{}
	after := res0.Position
	page := func() {
		var evs []varve.RecordedEvent
		retry(func() error {
			var err error
			evs, err = b.ReadAll(ctx, varve.AllQuery{After: after, Limit: 100}, nil)
			return err
		})
		for _, e := range evs {
			seen[e.Stream] = true
			after = e.Position
		}
	}
	page()
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	page()
	for _, s := range []string{"a-1", "a-2"} {
		if !seen[s] {
			t.Errorf("the reader never saw the event of %s (read through %s)", s, after)
		}
	}
}
