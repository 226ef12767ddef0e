package backendtest

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

var timeInPast = time.Unix(1, 0)

// testConcurrentSameStream: writers race for each version with an exact
// expectation; exactly one wins each round, the others conflict.
func testConcurrentSameStream(t *testing.T, f Factory) {
	s := store(t, f)
	stream := prefix(t) + "race"
	const writers, rounds = 8, 25
	winners := make([]varve.Event, rounds)
	var version varve.Version // the stream's version when a round begins
	for round := range rounds {
		var wg sync.WaitGroup
		var wins, conflicts atomic.Int32
		var next atomic.Uint64
		gate := make(chan struct{})
		for range writers {
			wg.Go(func() {
				evs := events("Race", 1+rand.IntN(3))
				<-gate
				res, err := s.Append(ctxFor(t), stream, varve.Exact(version), evs...)
				switch {
				case err == nil:
					wins.Add(1)
					winners[round] = evs[0]
					next.Store(res.LastVersion)
				case errors.Is(err, varve.ErrWrongExpectedVersion):
					conflicts.Add(1)
				default:
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		close(gate)
		wg.Wait()
		if wins.Load() != 1 || conflicts.Load() != writers-1 {
			t.Fatalf("round %d: %d winners and %d conflicts, want 1 and %d", round, wins.Load(), conflicts.Load(), writers-1)
		}
		version = next.Load()
	}
	got := mustRead(t, s, stream)
	for i, e := range got {
		if e.Version != varve.Version(i+1) {
			t.Fatalf("versions not contiguous at %d: %d", i, e.Version)
		}
	}
	seen := 0
	for _, e := range got {
		if seen < rounds && e.ID == winners[seen].ID {
			seen++
		}
	}
	if seen != rounds {
		t.Fatalf("found %d of %d winning appends in order", seen, rounds)
	}
}

func testConcurrentManyStreams(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	start, err := s.LastPosition(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	const writers, appends = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			own := fmt.Sprintf("%sown-%d", pfx, w)
			for i := range appends {
				if _, err := s.Append(ctxFor(t), own, varve.Exact(varve.Version(i)), events("Own", 1)...); err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				shared := fmt.Sprintf("%sshared-%d", pfx, i%3)
				if _, err := s.Append(ctxFor(t), shared, varve.Any, events("Shared", 2)...); err != nil {
					t.Errorf("writer %d shared append: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	total := 0
	for w := range writers {
		if n := len(mustRead(t, s, fmt.Sprintf("%sown-%d", pfx, w))); n != appends {
			t.Fatalf("writer %d's stream has %d events, want %d", w, n, appends)
		}
		total += appends
	}
	for i := range 3 {
		evs := mustRead(t, s, fmt.Sprintf("%sshared-%d", pfx, i))
		if !equalVersions(versions(evs), seqVersions(1, varve.Version(len(evs)))) {
			t.Fatalf("shared stream %d: versions not contiguous", i)
		}
		total += len(evs)
	}
	if total != writers*appends*3 {
		t.Fatalf("%d events in streams, want %d", total, writers*appends*3)
	}
	got := eventually(t, s, start, pfx, total)
	ids := map[uuid.UUID]bool{}
	for _, e := range got {
		ids[e.ID] = true
	}
	if len(got) != total || len(ids) != total {
		t.Fatalf("$all has %d events of the test, %d distinct, want %d", len(got), len(ids), total)
	}
}

// testCatchUp: while writers append (some in large batches, some failing or
// cancelled), a reader follows $all in small pages from its last position.
// Every committed event is seen exactly once, in each stream's version order,
// and no event of a failed append is ever seen.
func testCatchUp(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	start, err := s.LastPosition(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	unique := s.Features().UniqueEventIDs
	var (
		mu        sync.Mutex
		committed = map[uuid.UUID]bool{}
		failed    = map[uuid.UUID]bool{}
	)
	record := func(evs []varve.Event, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if ok {
				committed[e.ID] = true
			} else if !committed[e.ID] {
				failed[e.ID] = true
			}
		}
	}
	const writers, appends = 8, 40
	ctx, stop := context.WithCancel(ctxFor(t))
	defer stop()

	type seen struct {
		ids      map[uuid.UUID]int
		versions map[string]varve.Version
		count    int
	}
	got := seen{ids: map[uuid.UUID]int{}, versions: map[string]varve.Version{}}
	readerErr := make(chan error, 1)
	writersDone := make(chan struct{})
	go func() {
		pos := start
		var buf []varve.RecordedEvent
		idle := 0
		for {
			res, err := s.ReadAllPage(ctx, pos, buf[:0], varve.Limit(7))
			if err != nil {
				readerErr <- err
				return
			}
			page := res.Events
			buf = page
			for _, e := range page {
				if !pos.Less(e.Position) {
					readerErr <- fmt.Errorf("position %s after %s", e.Position, pos)
					return
				}
				pos = e.Position
				if !strings.HasPrefix(e.Stream, pfx) {
					continue
				}
				got.ids[e.ID]++
				if prev := got.versions[e.Stream]; e.Version <= prev {
					readerErr <- fmt.Errorf("stream %s: version %d after %d", e.Stream, e.Version, prev)
					return
				}
				got.versions[e.Stream] = e.Version
				got.count++
			}
			if len(page) > 0 {
				idle = 0
				continue
			}
			select {
			case <-writersDone:
				// Writers are done: read until two empty pages in a row
				// and the count matches what was committed.
				mu.Lock()
				want := len(committed)
				mu.Unlock()
				if got.count >= want {
					if idle++; idle >= 2 {
						readerErr <- nil
						return
					}
				}
				time.Sleep(10 * time.Millisecond)
			case <-ctx.Done():
				readerErr <- ctx.Err()
				return
			default:
				time.Sleep(time.Millisecond)
			}
		}
	}()

	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := range appends {
				stream := fmt.Sprintf("%ss%d", pfx, r.IntN(12))
				n := 1 + r.IntN(4)
				if r.IntN(10) == 0 {
					n = 50 + r.IntN(150)
				}
				evs := events("CatchUp", n)
				switch kind := r.IntN(10); {
				case kind == 0: // cancelled before it starts: nothing may be written
					cctx, cancel := context.WithCancel(ctx)
					cancel()
					_, err := s.Append(cctx, stream, varve.Any, evs...)
					if !errors.Is(err, context.Canceled) {
						t.Errorf("cancelled append: %v", err)
					}
					record(evs, false)
				case kind == 1: // fails its expectation
					_, err := s.Append(ctx, stream, varve.Exact(1_000_000), evs...)
					if !errors.Is(err, varve.ErrWrongExpectedVersion) {
						t.Errorf("stale append: %v", err)
					}
					record(evs, false)
				case kind == 2 && unique && n > 1: // fails mid-way on a known id
					prior := events("Prior", 1)
					if _, err := s.Append(ctx, stream, varve.Any, prior...); err != nil {
						t.Errorf("append: %v", err)
						return
					}
					record(prior, true)
					evs[n-1].ID = prior[0].ID
					_, err := s.Append(ctx, stream, varve.Any, evs...)
					if !errors.Is(err, varve.ErrDuplicateEvent) {
						t.Errorf("poisoned batch: %v", err)
					}
					record(evs[:n-1], false)
				default:
					if _, err := s.Append(ctx, stream, varve.Any, evs...); err != nil {
						t.Errorf("append %d of writer %d: %v", i, w, err)
						return
					}
					record(evs, true)
				}
			}
		})
	}
	wg.Wait()
	close(writersDone)
	select {
	case err := <-readerErr:
		if err != nil {
			t.Fatalf("reader: %v", err)
		}
	case <-time.After(2 * time.Minute):
		stop()
		<-readerErr // the reader owns got until it ends
		t.Fatalf("reader did not catch up: saw %d of %d committed events", got.count, len(committed))
	}
	for id := range committed {
		if got.ids[id] != 1 {
			t.Fatalf("committed event %s seen %d times", id, got.ids[id])
		}
	}
	for id := range failed {
		if got.ids[id] != 0 {
			t.Fatalf("event %s of a failed append was seen", id)
		}
	}
	if got.count != len(committed) {
		t.Fatalf("saw %d events, %d committed", got.count, len(committed))
	}
	t.Logf("reader saw %d committed events; %d events of failed appends stayed invisible", got.count, len(failed))
	if n, err := CheckInvariants(ctxFor(t), s, pfx); err != nil || n != len(committed) {
		t.Fatalf("invariants after the catch-up run: %d events checked, %d committed: %v", n, len(committed), err)
	}
}
