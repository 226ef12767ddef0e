package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// openTxAppend appends one event to stream inside an explicit transaction
// that it leaves open, as a slow writer would: it holds its transaction id
// and the stream's lock until the caller commits or rolls back.
func openTxAppend(t *testing.T, b *postgres.Backend, stream string) (pgx.Tx, uuid.UUID) {
	t.Helper()
	tx, id, err := beginAppend(context.Background(), b, stream)
	if err != nil {
		t.Fatal(err)
	}
	return tx, id
}

func beginAppend(ctx context.Context, b *postgres.Backend, stream string) (pgx.Tx, uuid.UUID, error) {
	tx, err := b.Pool().Begin(ctx)
	if err != nil {
		return nil, uuid.Nil, err
	}
	id := varve.NewEventID()
	_, err = tx.Exec(ctx, "SELECT * FROM "+b.Schema()+".append($1, -1, $2, $3, $4, $5)",
		stream, [][16]byte{id}, []string{"Slow"}, [][]byte{[]byte("{}")}, [][]byte{nil})
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, uuid.Nil, fmt.Errorf("append in an open transaction: %w", err)
	}
	return tx, id, nil
}

// openTxRowFirst writes a stream's row and then its first event in an
// explicit transaction that it leaves open, as the fast append does in one
// statement, without calling varve's functions.
func openTxRowFirst(t *testing.T, b *postgres.Backend, stream string) (pgx.Tx, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := varve.NewEventID()
	for _, sql := range []string{
		"INSERT INTO " + b.Schema() + ".streams (stream, version) VALUES ($1, 1)",
		"INSERT INTO " + b.Schema() + ".events (tx, stream, version, id, type) VALUES (pg_current_xact_id()::text::bigint, $1, 1, $2, 'Slow')",
	} {
		args := []any{stream}
		if strings.Contains(sql, "events") {
			args = append(args, [16]byte(id))
		}
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			_ = tx.Rollback(ctx)
			t.Fatal(err)
		}
	}
	return tx, id
}

func readAllIDs(t *testing.T, s *varve.Store, after varve.Position, pfx string) ([]uuid.UUID, varve.Position) {
	t.Helper()
	var ids []uuid.UUID
	last := after
	for e, err := range s.ReadAll(context.Background(), after, varve.PageSize(3)) {
		if err != nil {
			t.Fatal(err)
		}
		last = e.Position
		if strings.HasPrefix(e.Stream, pfx) {
			ids = append(ids, e.ID)
		}
	}
	return ids, last
}

// TestHorizon drives the case that loses events in naive PostgreSQL event
// stores: a transaction that got its position first commits last. $all must
// hold back everything after it until it ends, then deliver it in order, and
// never show a rolled-back one.
func TestHorizon(t *testing.T) {
	b := open(t, config(t, testSchema))
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pfx := fmt.Sprintf("horizon-%d-", time.Now().UnixNano())
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name     string
		commit   bool
		begin    func(t *testing.T, b *postgres.Backend, stream string) (pgx.Tx, uuid.UUID)
		existing bool // the slow writer appends to a stream that exists
	}{
		{"slow writer commits", true, openTxAppend, false},
		{"slow writer rolls back", false, openTxAppend, false},
		// The append function updates the stream's row, which evaluates
		// no default: it takes the writer lock itself.
		{"slow writer to an existing stream commits", true, openTxAppend, true},
		{"slow writer to an existing stream rolls back", false, openTxAppend, true},
		// The fast path's order, the stream's row first, with nothing of
		// varve's code: the default of a column of streams takes the
		// writer lock, as it does for older versions of varve during an
		// upgrade.
		{"slow row-first writer commits", true, openTxRowFirst, false},
		{"slow row-first writer rolls back", false, openTxRowFirst, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pfx := pfx + strings.ReplaceAll(tc.name, " ", "-") + "-"
			existing := 0
			if tc.existing {
				res, err := s.Append(ctx, pfx+"slow", varve.NoStream, varve.Event{Type: "First"})
				if err != nil {
					t.Fatal(err)
				}
				waitForPosition(t, b, res.Position)
				existing = 1
			}
			// The reader checkpoints at the end of what it can read now.
			before, checkpoint := readAllIDs(t, s, start, pfx)
			if len(before) != existing {
				t.Fatalf("fresh prefix has %d events, want %d", len(before), existing)
			}
			slow, slowID := tc.begin(t, b, pfx+"slow")
			var fast []uuid.UUID
			var lastFast varve.Position
			for i := range 5 {
				evs := []varve.Event{{Type: "Fast", Data: []byte("{}")}}
				res, err := s.Append(ctx, fmt.Sprintf("%sfast-%d", pfx, i), varve.NoStream, evs...)
				if err != nil {
					_ = slow.Rollback(ctx)
					t.Fatal(err)
				}
				fast = append(fast, evs[0].ID)
				lastFast = res.Position
			}
			// Committed after the slow writer's transaction began: held back.
			held, cp := readAllIDs(t, s, checkpoint, pfx)
			if len(held) != 0 {
				_ = slow.Rollback(ctx)
				t.Fatalf("$all returned %d events committed after a still-open transaction", len(held))
			}
			last, err := s.LastPosition(ctx)
			if err != nil {
				_ = slow.Rollback(ctx)
				t.Fatal(err)
			}
			if tc.commit {
				err = slow.Commit(ctx)
			} else {
				err = slow.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			// Resume from the checkpoint taken while the writer was open,
			// once $all has passed the fast appends (another test's writer
			// of this schema may hold it back for a moment).
			waitForPosition(t, b, lastFast)
			got, _ := readAllIDs(t, s, cp, pfx)
			want := fast
			if tc.commit {
				want = append([]uuid.UUID{slowID}, fast...)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the slow writer ended: got %v, want %v", got, want)
			}
			after, err := s.LastPosition(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !last.Less(after) {
				t.Fatalf("last position did not move past the held-back events: %s then %s", last, after)
			}
		})
	}
}

// TestSameStreamOrder: many writers append to one stream with Any while a
// reader follows $all; the stream's versions appear in $all in order, which
// holds because a transaction gets its id only once it holds the stream's
// lock.
func TestSameStreamOrder(t *testing.T) {
	b := open(t, config(t, testSchema))
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stream := fmt.Sprintf("order-%d", time.Now().UnixNano())
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const writers, appends = 8, 30
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	var mu sync.Mutex
	var last varve.Position
	for range writers {
		wg.Go(func() {
			for range appends {
				res, err := s.Append(ctx, stream, varve.Any, varve.Event{Type: "E"})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if last.Less(res.Position) {
					last = res.Position
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitForPosition(t, b, last)
	var prev varve.Version
	n := 0
	for e, err := range s.ReadAll(ctx, start) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Stream != stream {
			continue
		}
		if e.Version != prev+1 {
			t.Fatalf("$all has version %d of the stream after %d", e.Version, prev)
		}
		prev = e.Version
		n++
	}
	if n != writers*appends {
		t.Fatalf("$all has %d events of the stream, want %d", n, writers*appends)
	}
}

// TestWatchAcrossBackends: a watcher on one backend is woken by an append
// through another backend on the same schema, through NOTIFY.
func TestWatchAcrossBackends(t *testing.T) {
	cfg := config(t, testSchema)
	cfg.WatchPoll = time.Hour // no poll wake-ups: only the NOTIFY counts
	watcher := open(t, cfg)
	writer := open(t, config(t, testSchema))
	ch := watcher.Watch()
	// The listener connects in the background; appends before it listens
	// are missed, so keep appending until the wake-up comes.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ch:
			return
		case <-deadline:
			t.Fatal("no wake-up from another backend's appends within 10s")
		case <-tick.C:
			_, err := writer.Append(context.Background(), varve.AppendRequest{
				Stream: fmt.Sprintf("watch-%d", time.Now().UnixNano()), Expected: varve.NoStream,
				Events: []varve.Event{{ID: varve.NewEventID(), Type: "E"}},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestWatchAfterClose(t *testing.T) {
	b := open(t, config(t, testSchema))
	ch := b.Watch()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a watcher")
	}
	select {
	case <-b.Watch():
	default:
		t.Fatal("Watch after Close returned an open channel")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := b.LastPosition(context.Background())
	if !errors.Is(err, varve.ErrClosed) {
		t.Fatalf("last position after close: %v", err)
	}
}

// TestCancelWhileLocked: an append that waits for its stream's lock and is
// cancelled gives the context's error and is aborted on the server; it
// does not commit once the lock comes free.
func TestCancelWhileLocked(t *testing.T) {
	b := open(t, config(t, testSchema))
	stream := fmt.Sprintf("cancel-locked-%d", time.Now().UnixNano())
	holder, _ := openTxAppend(t, b, stream)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Any,
		Events: []varve.Event{{ID: varve.NewEventID(), Type: "Cancelled"}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		_ = holder.Rollback(context.Background())
		t.Fatalf("append waiting for a lock past its deadline: %v", err)
	}
	if err := holder.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	_, err = b.StreamInfo(context.Background(), stream)
	if !errors.Is(err, varve.ErrStreamNotFound) {
		t.Fatalf("the cancelled append was written after all: stream info %v", err)
	}
}

// TestHorizonAtHead follows $all at its head with the read that ReadAll
// makes (the rows after a position and below all_horizon, one statement)
// while writers commit as fast as they can (half of them conditional
// appends on a tag, which take their locks in a statement of their own),
// and checks that no
// acknowledged transaction is ever passed over: the first read whose
// horizon is above a transaction's id returns its rows. With the writer
// lock matched by virtual transaction id (migration 5 of the squashed
// history), a writer that
// committed just after the read's snapshot was taken for a non-writer
// about once a second here.
func TestHorizonAtHead(t *testing.T) {
	cfg := config(t, testSchema+"_head")
	s, err := varve.New(open(t, cfg), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := testConn(t, cfg.ConnString)
	schema := pgx.Identifier{cfg.Schema}.Sanitize()
	ctx, stop := context.WithTimeout(context.Background(), 6*time.Second)
	defer stop()

	var mu sync.Mutex
	acked := map[int64]bool{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Odd writers append on a condition over a tag of their own
			// (the pipelined statements), the others plainly.
			tag := fmt.Sprintf("head-w%d", w)
			var after varve.Position
			for i := 0; ctx.Err() == nil; i++ {
				evs := make([]varve.Event, 1+(i*7+w)%20)
				for j := range evs {
					evs[j] = varve.NewEvent("head", nil)
				}
				stream := fmt.Sprintf("head-%d", (i+w)%20)
				var res varve.AppendResult
				var err error
				if w%2 == 1 {
					for j := range evs {
						evs[j].Tags = []string{tag}
					}
					cond := varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{tag}}}}, After: after}
					res, err = s.AppendIf(ctx, stream, varve.Any, cond, evs...)
					after = res.Position
				} else {
					res, err = s.Append(ctx, stream, varve.Any, evs...)
				}
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("append: %v", err)
					}
					return
				}
				mu.Lock()
				acked[int64(res.Position.Commit)] = true
				mu.Unlock()
			}
		}()
	}

	// Each read returns the transactions of [lo, h), lo the highest
	// horizon before it.
	type read struct {
		lo, h int64
		txs   map[int64]bool
	}
	var reads []read
	var lo int64
	q := `WITH hz AS MATERIALIZED (SELECT ` + schema + `.all_horizon() AS h)
SELECT hz.h, (SELECT array_agg(DISTINCT e.tx) FROM ` + schema + `.events e WHERE e.tx >= $1 AND e.tx < hz.h) FROM hz`
	for ctx.Err() == nil {
		var h int64
		var txs []int64
		if err := conn.QueryRow(context.Background(), q, lo).Scan(&h, &txs); err != nil {
			t.Fatal(err)
		}
		r := read{lo: lo, h: h, txs: make(map[int64]bool, len(txs))}
		for _, x := range txs {
			r.txs[x] = true
		}
		reads = append(reads, r)
		lo = max(lo, h)
	}
	wg.Wait()

	checked, missed := 0, 0
	for x := range acked {
		i := sort.Search(len(reads), func(i int) bool { return max(reads[i].lo, reads[i].h) > x }) // the first read through x
		if i == len(reads) {
			continue // acknowledged after the last read
		}
		checked++
		if !reads[i].txs[x] {
			missed++
			if missed <= 3 {
				t.Errorf("transaction %d: the read of [%d, %d) did not return it, and no later read covers it", x, reads[i].lo, reads[i].h)
			}
		}
	}
	t.Logf("%d reads; %d of %d acknowledged transactions checked, %d passed over", len(reads), checked, len(acked), missed)
	if checked == 0 {
		t.Fatal("no acknowledged transaction was below a read's horizon")
	}
}
