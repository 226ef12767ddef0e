package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// TestAdversarialCatchUp is issue 3's adversarial test. While fast writers
// append 50,000 events in batches, slow writers keep their append's
// transaction open for a second before committing or rolling it back, and
// idle sessions hold a transaction id open doing nothing. A reader follows
// $all in pages and, after every page, "restarts": it keeps only the text
// form of its position, parses it back, and every 20 pages reopens the
// backend from scratch. Every committed event must be seen exactly once, in
// each stream's version order, and no rolled-back event ever.
func TestAdversarialCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("adversarial test takes seconds")
	}
	cfg := config(t, testSchema)
	cfg.MaxConns = 16
	b := open(t, cfg)
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pfx := fmt.Sprintf("adv-%d-", time.Now().UnixNano())
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}

	const fastEvents, fastWriters, batch = 50_000, 4, 50
	var (
		mu         sync.Mutex
		committed  = map[uuid.UUID]bool{}
		rolledBack = map[uuid.UUID]bool{}
		slowTx     atomic.Int64
		idleTx     atomic.Int64
	)
	var fast, others sync.WaitGroup
	fastDone := make(chan struct{})
	for w := range fastWriters {
		fast.Go(func() {
			for i := range fastEvents / fastWriters / batch {
				evs := make([]varve.Event, batch)
				for k := range evs {
					evs[k] = varve.Event{Type: "Fast", Data: []byte(`{}`)}
				}
				stream := fmt.Sprintf("%sfast-%d-%d", pfx, w, i%20)
				if _, err := s.Append(ctx, stream, varve.Any, evs...); err != nil {
					t.Errorf("fast append: %v", err)
					return
				}
				mu.Lock()
				for _, e := range evs {
					committed[e.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	// Slow writers: an append whose transaction stays open for a second;
	// each has streams of its own, as it holds the stream's lock meanwhile.
	for w := range 2 {
		others.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-fastDone:
					return
				default:
				}
				tx, id, err := beginAppend(ctx, b, fmt.Sprintf("%sslow-%d", pfx, w))
				if err != nil {
					t.Errorf("slow append: %v", err)
					return
				}
				time.Sleep(time.Second)
				commit := i%2 == 0
				if commit {
					err = tx.Commit(ctx)
				} else {
					err = tx.Rollback(ctx)
				}
				if err != nil {
					t.Errorf("end slow transaction: %v", err)
					return
				}
				slowTx.Add(1)
				mu.Lock()
				if commit {
					committed[id] = true
				} else {
					rolledBack[id] = true
				}
				mu.Unlock()
			}
		})
	}
	// Idle sessions: a transaction that takes an id and then sits idle.
	others.Go(func() {
		for {
			select {
			case <-fastDone:
				return
			default:
			}
			tx, err := b.Pool().Begin(ctx)
			if err != nil {
				t.Errorf("idle session: %v", err)
				return
			}
			if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
				t.Errorf("idle session: %v", err)
			}
			time.Sleep(1500 * time.Millisecond)
			_ = tx.Rollback(ctx)
			idleTx.Add(1)
		}
	})
	go func() { fast.Wait(); close(fastDone) }()

	seen := map[uuid.UUID]int{}
	versions := map[string]varve.Version{}
	text := start.String()
	var buf []varve.RecordedEvent
	reader := s
	pages, reopens := 0, 0
	writersDone := make(chan struct{})
	go func() { <-fastDone; others.Wait(); close(writersDone) }()
	for {
		pos, err := varve.ParsePosition(text) // all the reader keeps between pages
		if err != nil {
			t.Fatal(err)
		}
		res, err := reader.ReadAllPage(ctx, pos, buf[:0], varve.Limit(200))
		if err != nil {
			t.Fatal(err)
		}
		page := res.Events
		buf = page
		for _, e := range page {
			if !pos.Less(e.Position) {
				t.Fatalf("position %s after %s", e.Position, pos)
			}
			pos = e.Position
			if !strings.HasPrefix(e.Stream, pfx) {
				continue
			}
			seen[e.ID]++
			if e.Version <= versions[e.Stream] {
				t.Fatalf("stream %s: version %d after %d", e.Stream, e.Version, versions[e.Stream])
			}
			versions[e.Stream] = e.Version
		}
		text = pos.String()
		if pages++; pages%20 == 0 {
			if reader != s {
				_ = reader.Close()
			}
			reader, err = varve.New(open(t, cfg), varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			reopens++
		}
		if len(page) > 0 {
			continue
		}
		select {
		case <-writersDone:
			mu.Lock()
			all := len(committed)
			mu.Unlock()
			if len(seen) >= all {
				goto check
			}
			time.Sleep(5 * time.Millisecond) // other tests' transactions may hold the horizon
		case <-ctx.Done():
			t.Fatalf("reader did not catch up: saw %d events", len(seen))
		case <-time.After(2 * time.Millisecond):
		}
	}
check:
	if t.Failed() {
		return
	}
	for id := range committed {
		if seen[id] != 1 {
			t.Fatalf("committed event %s seen %d times", id, seen[id])
		}
	}
	for id := range rolledBack {
		if seen[id] != 0 {
			t.Fatalf("rolled-back event %s was seen", id)
		}
	}
	if len(seen) != len(committed) || len(committed) < fastEvents {
		t.Fatalf("saw %d events, %d committed (want at least %d)", len(seen), len(committed), fastEvents)
	}
	if slowTx.Load() < 2 || idleTx.Load() < 1 {
		t.Fatalf("too few slow (%d) or idle (%d) transactions overlapped the run", slowTx.Load(), idleTx.Load())
	}
	t.Logf("reader saw %d committed events exactly once in %d pages (%d reopens); %d slow transactions (%d rolled back), %d idle sessions",
		len(seen), pages, reopens, slowTx.Load(), len(rolledBack), idleTx.Load())
}

// TestServerGoneMidAppend terminates the server process of the connection
// that is running an append (pg_terminate_backend), a plain one and a
// conditional one on a tag (the pipelined statements). The caller gets an
// error, and the append is either wholly there or not at all.
func TestServerGoneMidAppend(t *testing.T) {
	for _, conditional := range []bool{false, true} {
		name := "append"
		if conditional {
			name = "conditional append"
		}
		t.Run(name, func(t *testing.T) { serverGoneMidAppend(t, conditional) })
	}
}

func serverGoneMidAppend(t *testing.T, conditional bool) {
	cfg := config(t, testSchema)
	app := fmt.Sprintf("varve_terminate_%d", time.Now().UnixNano())
	cfg.ConnString = withParam(cfg.ConnString, "application_name="+app)
	b := open(t, cfg)
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	admin := open(t, config(t, testSchema)).Pool()
	ctx := context.Background()
	pfx := fmt.Sprintf("gone-%d-", time.Now().UnixNano())
	failed, whole := 0, 0
	for i := 0; i < 60 && failed < 5; i++ {
		stream := fmt.Sprintf("%s%d", pfx, i)
		evs := make([]varve.Event, 2000+rand.IntN(2000))
		for k := range evs {
			evs[k] = varve.Event{Type: "Big", Data: []byte(`{"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)}
			if conditional {
				evs[k].Tags = []string{stream}
			}
		}
		// The killer waits until the append's statement is running on the
		// server, then terminates that server process.
		appended := make(chan struct{})
		killed := make(chan struct{})
		go func() {
			defer close(killed)
			for {
				select {
				case <-appended:
					return
				default:
				}
				var n int
				// (pg_stat_activity keeps the first 1 kB of a statement: the
				// pipelined append's inserts come later than that.)
				err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
					WHERE application_name = $1 AND state = 'active'
					AND (query LIKE '%append(%' OR query LIKE '%INSERT INTO%events%' OR query LIKE 'WITH dup AS%')`, app).Scan(&n)
				if err != nil || n > 0 {
					return
				}
			}
		}()
		if conditional {
			cond := varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Tags: []string{stream}}}}}
			_, err = s.AppendIf(ctx, stream, varve.NoStream, cond, evs...)
		} else {
			_, err = s.Append(ctx, stream, varve.NoStream, evs...)
		}
		close(appended)
		<-killed
		// The killer may have terminated the append's connection just after
		// the append returned it to the pool: that connection's next use
		// would fail. The read below starts on fresh connections.
		b.Pool().Reset()
		n := 0
		for e, rerr := range s.ReadStream(ctx, stream) {
			if errors.Is(rerr, varve.ErrStreamNotFound) {
				break
			}
			if rerr != nil {
				t.Fatalf("read %s after the kill: %v", stream, rerr)
			}
			if e.ID != evs[n].ID {
				t.Fatalf("%s: event %d is not the appended one", stream, n)
			}
			n++
		}
		switch {
		case err == nil && n == len(evs):
			whole++
		case err != nil && (n == 0 || n == len(evs)):
			failed++
			if errors.Is(err, varve.ErrInvalidArgument) || errors.Is(err, varve.ErrWrongExpectedVersion) {
				t.Fatalf("a lost connection reported as %v", err)
			}
		default:
			t.Fatalf("append of %d events: err %v, %d of them stored", len(evs), err, n)
		}
	}
	if failed == 0 {
		t.Fatalf("no append was cut off in 60 tries (%d whole): the test did not test", whole)
	}
	t.Logf("%d appends cut off by pg_terminate_backend (each wholly there or absent), %d completed", failed, whole)
}
