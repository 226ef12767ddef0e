package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// foreignHold is how long the foreign transactions of
// TestForeignTransactions stay open: 5s, or VARVE_FOREIGN_HOLD (to measure
// the delay a longer one caused).
func foreignHold(t *testing.T) time.Duration {
	hold := 5 * time.Second
	if v := os.Getenv("VARVE_FOREIGN_HOLD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("VARVE_FOREIGN_HOLD: %v", err)
		}
		hold = d
	}
	return hold
}

// foreignDatabase creates a database of its own on the test server and
// returns a connection string for it; the database is dropped when the
// test ends.
func foreignDatabase(t *testing.T, cfg postgres.Config) string {
	t.Helper()
	admin := testConn(t, cfg.ConnString)
	name := "varve_foreign_" + randomSuffix()
	ctx := context.Background()
	var err error
	for range 20 { // CREATE DATABASE fails while another session uses the template
		if _, err = admin.Exec(ctx, "CREATE DATABASE "+name); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	pc, err := pgx.ParseConfig(admin.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	pc.Database = name
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", pc.User, pc.Host, pc.Port, name)
}

// TestForeignTransactions is issue 14's point 4: a transaction that never
// touches varve, idle in another database or writing in this one, holds a
// transaction id for seconds while events are appended; a subscriber
// following $all sees each append within a bound, here 2s (tens of
// milliseconds are typical; the bound is generous for a loaded machine).
// Before the writer lock, $all waited for the foreign transaction to end.
func TestForeignTransactions(t *testing.T) {
	hold := foreignHold(t)
	cases := []struct {
		name  string
		begin func(t *testing.T, cfg postgres.Config) pgx.Tx
	}{
		{"idle in transaction in another database", func(t *testing.T, cfg postgres.Config) pgx.Tx {
			conn, err := pgx.Connect(context.Background(), foreignDatabase(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close(context.Background()) })
			tx, err := conn.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(context.Background(), "SELECT pg_current_xact_id()"); err != nil {
				t.Fatal(err)
			}
			return tx
		}},
		{"writing transaction in the same database", func(t *testing.T, cfg postgres.Config) pgx.Tx {
			tx, err := testConn(t, cfg.ConnString).Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(context.Background(), "CREATE TEMP TABLE foreign_rows (x int); INSERT INTO foreign_rows VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			return tx
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config(t, testSchema)
			b := open(t, cfg)
			s, err := varve.New(b, varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			start, err := s.LastPosition(ctx)
			if err != nil {
				t.Fatal(err)
			}
			foreign := tc.begin(t, cfg)
			var foreignXID uint64
			if err := foreign.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&foreignXID); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			seen := make(map[uuid.UUID]time.Time)
			var mu sync.Mutex
			subCtx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { // the subscriber: follows $all from the start position
				pos := start
				for subCtx.Err() == nil {
					page, err := s.ReadAllPage(subCtx, pos, nil, varve.Limit(100))
					if err != nil {
						if subCtx.Err() == nil {
							t.Error(err)
						}
						return
					}
					now := time.Now()
					mu.Lock()
					for _, e := range page.Events {
						seen[e.ID] = now
						pos = e.Position
					}
					mu.Unlock()
					if len(page.Events) == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			})
			defer func() { stop(); wg.Wait() }()
			pfx := fmt.Sprintf("foreign-%d-", time.Now().UnixNano())
			appended := map[uuid.UUID]time.Time{}
			for i := 0; time.Since(began) < hold-500*time.Millisecond; i++ {
				ev := varve.Event{ID: varve.NewEventID(), Type: "E"}
				res, err := s.Append(ctx, fmt.Sprintf("%s%d", pfx, i), varve.NoStream, ev)
				if err != nil {
					t.Fatal(err)
				}
				if res.Position.Commit <= foreignXID {
					t.Fatalf("append %d has transaction id %d, not after the foreign one's %d", i, res.Position.Commit, foreignXID)
				}
				appended[ev.ID] = time.Now()
				time.Sleep(100 * time.Millisecond)
			}
			// Every append was made while the foreign transaction was
			// open; it ends at its time whatever the subscriber saw.
			time.Sleep(time.Until(began.Add(hold)))
			if err := foreign.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			var delays []time.Duration
			deadline := time.Now().Add(30 * time.Second)
			for id, at := range appended {
				for {
					mu.Lock()
					when, ok := seen[id]
					mu.Unlock()
					if ok {
						delays = append(delays, when.Sub(at))
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the subscriber never saw event %s", id)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			slices.Sort(delays)
			med, worst := delays[len(delays)/2], delays[len(delays)-1]
			t.Logf("foreign transaction open %s: %d appends, subscriber delay median %s, max %s",
				hold, len(delays), med.Round(time.Millisecond), worst.Round(time.Millisecond))
			if worst > 2*time.Second {
				t.Fatalf("the subscriber saw an append %s after it was acknowledged (bound 2s)", worst)
			}
		})
	}
}
