package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// TestSlowWritersCatchUp: fast writers, slow writers that keep their
// transaction open for a while after appending, and writers that roll back,
// all at once, while a reader follows $all in small pages from its last
// position. The reader must see every committed event exactly once, in
// each stream's version order, and no rolled-back one.
func TestSlowWritersCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	cfg := config(t, testSchema)
	cfg.MaxConns = 12
	b := open(t, cfg)
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pfx := fmt.Sprintf("stress-%d-", time.Now().UnixNano())
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	committed := map[uuid.UUID]bool{}
	rolledBack := map[uuid.UUID]bool{}
	const writers, appends = 6, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for range appends {
				stream := fmt.Sprintf("%s%d", pfx, r.IntN(8))
				switch kind := r.IntN(3); kind {
				case 0: // fast
					evs := []varve.Event{{Type: "Fast"}, {Type: "Fast"}}
					if _, err := s.Append(ctx, stream, varve.Any, evs...); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					committed[evs[0].ID], committed[evs[1].ID] = true, true
					mu.Unlock()
				default: // slow: open, wait, then commit or roll back
					tx, id, err := beginAppend(ctx, b, stream)
					if err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Duration(1+r.IntN(15)) * time.Millisecond)
					commit := kind == 1
					if commit {
						err = tx.Commit(ctx)
					} else {
						err = tx.Rollback(ctx)
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if commit {
						committed[id] = true
					} else {
						rolledBack[id] = true
					}
					mu.Unlock()
				}
			}
		})
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[uuid.UUID]int{}
	versions := map[string]varve.Version{}
	pos := start
	var buf []varve.RecordedEvent
	finished := false
	for {
		page, err := s.ReadAllPage(ctx, pos, 5, buf[:0])
		if err != nil {
			t.Fatal(err)
		}
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
		if len(page) > 0 {
			continue
		}
		if finished {
			break
		}
		select {
		case <-done:
			finished = true // one more pass after the last commit
		case <-time.After(time.Millisecond):
		}
	}
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
	if len(seen) != len(committed) {
		t.Fatalf("saw %d events, %d committed", len(seen), len(committed))
	}
	t.Logf("reader saw %d committed events; %d rolled-back stayed invisible", len(committed), len(rolledBack))
}
