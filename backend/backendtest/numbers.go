package backendtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// testPositionNumbers holds position numbers to their contract on backends
// that declare them: under concurrent writers of single, multi-event and
// multi-stream appends, the events' numbers are at most 2^53-1 and strictly
// increasing in $all's order; each number gives back its event's position,
// and every number between two events' gives a position between them, after
// which a read starts at the later one; removing events never lowers a
// number, and a number kept from before the removal never skips an event.
func testPositionNumbers(t *testing.T, f Factory) {
	s := store(t, f)
	if lacks(t, f, s, varve.Capabilities{PositionNumbers: true}) {
		_, err := s.NumberPositions(ctxFor(t), []varve.Position{{Seq: 1}})
		wantErr(t, "numbers without the capability", err, varve.ErrNotSupported)
		_, err = s.PositionOfNumber(ctxFor(t), 1)
		wantErr(t, "a number's position without the capability", err, varve.ErrNotSupported)
		t.Skipf("%s does not number its positions", s.Features().Name)
	}
	t.Run("Order", func(t *testing.T) { t.Parallel(); testNumbersOrder(t, s) })
	t.Run("Removal", func(t *testing.T) { t.Parallel(); testNumbersRemoval(t, s) })
	t.Run("Bounds", func(t *testing.T) { t.Parallel(); testNumbersBounds(t, s, f) })
}

// numbers numbers the positions of evs, checking the contract's bounds.
func numbers(t *testing.T, s *varve.Store, evs []varve.RecordedEvent) []uint64 {
	t.Helper()
	ps := make([]varve.Position, len(evs))
	for i := range evs {
		ps[i] = evs[i].Position
	}
	ns, err := s.NumberPositions(ctxFor(t), ps)
	if err != nil {
		t.Fatalf("number %d positions: %v", len(ps), err)
	}
	for i, n := range ns {
		if n == 0 || n > varve.MaxPositionNumber {
			t.Fatalf("the event at %s is numbered %d, not in 1..2^53-1", ps[i], n)
		}
	}
	return ns
}

func testNumbersOrder(t *testing.T, s *varve.Store) {
	ctx := ctxFor(t)
	pfx := prefix(t)
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	multi := s.Capabilities().MultiAppend
	var acked newest
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for w := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := range 15 {
				var res []varve.AppendResult
				var err error
				if multi && i%3 == 0 {
					res, err = s.AppendMulti(ctx, []varve.StreamAppend{
						{Stream: fmt.Sprintf("%sm%d-%d-a", pfx, w, i), Expected: varve.NoStream, Events: events("A", 1+r.IntN(3))},
						{Stream: fmt.Sprintf("%sm%d-%d-b", pfx, w, i), Expected: varve.NoStream, Events: events("B", 1+r.IntN(3))},
					})
				} else {
					var one varve.AppendResult
					one, err = s.Append(ctx, fmt.Sprintf("%sw%d", pfx, w), varve.Any, events("E", 1+r.IntN(5))...)
					res = []varve.AppendResult{one}
				}
				if err != nil {
					errs <- err
					return
				}
				acked.add(res...)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	// $all may hold acknowledged appends back while a writer of another
	// test on the same server is in flight: the read must hold them all.
	acked.wait(t, s)
	all := readAllPrefix(t, s, start, pfx)
	// Numbered whole and in pages of 7: a number does not depend on the
	// other positions asked for with it.
	ns := numbers(t, s, all)
	for i := 0; i < len(all); i += 7 {
		part := numbers(t, s, all[i:min(i+7, len(all))])
		for j, n := range part {
			if n != ns[i+j] {
				t.Fatalf("the event at %s is numbered %d alone, %d with the others", all[i+j].Position, n, ns[i+j])
			}
		}
	}
	r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for i, e := range all {
		if i > 0 && ns[i] <= ns[i-1] {
			t.Fatalf("the event at %s is numbered %d, after %d at %s", e.Position, ns[i], ns[i-1], all[i-1].Position)
		}
		p, err := s.PositionOfNumber(ctx, ns[i])
		if err != nil {
			t.Fatal(err)
		}
		if p != e.Position {
			t.Fatalf("the number %d of the event at %s gives the position %s", ns[i], e.Position, p)
		}
		// Numbers from the one before to just under this one's give a
		// position that only this event, not the one before, is after.
		lo := varve.Start
		var below uint64
		if i > 0 {
			lo, below = all[i-1].Position, ns[i-1]
		}
		for _, n := range []uint64{ns[i] - 1, below + r.Uint64N(ns[i]-below)} {
			p, err := s.PositionOfNumber(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if p.Less(lo) || !p.Less(e.Position) {
				t.Fatalf("the number %d, between %d at %s and %d at %s, gives the position %s", n, below, lo, ns[i], e.Position, p)
			}
		}
	}
	// A read after such a position starts at the event, whatever the
	// backend makes of a number past the end of a commit.
	for _, i := range []int{0, len(all) / 2, len(all) - 1} {
		p, err := s.PositionOfNumber(ctx, ns[i]-1)
		if err != nil {
			t.Fatal(err)
		}
		page, err := s.ReadAllPage(ctx, p, nil, varve.Filter{StreamPrefixes: []string{pfx}}, varve.PageSize(1))
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) != 1 || page.Events[0].Position != all[i].Position {
			t.Fatalf("a read after the position %s of the number %d gives %s, want the event at %s", p, ns[i]-1, describeAll(page.Events), all[i].Position)
		}
	}
	t.Logf("%d events numbered from %d to %d", len(all), ns[0], ns[len(ns)-1])
}

func testNumbersRemoval(t *testing.T, s *varve.Store) {
	ctx := ctxFor(t)
	pfx := prefix(t)
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := mustAppend(t, s, pfx+"t", varve.NoStream, events("E", 5)...).Position
	if s.Capabilities().MultiAppend {
		res, err := s.AppendMulti(ctx, []varve.StreamAppend{
			{Stream: pfx + "a", Expected: varve.NoStream, Events: events("A", 3)},
			{Stream: pfx + "b", Expected: varve.NoStream, Events: events("B", 3)},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if last.Less(r.Position) {
				last = r.Position
			}
		}
	}
	// $all may lag an acknowledged append (on PostgreSQL while another
	// writer of the store is open): both reads below must see all of them.
	if err := s.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	before := readAllPrefix(t, s, start, pfx)
	old := numbers(t, s, before)
	if err := s.Truncate(ctx, pfx+"t", 3); err != nil {
		t.Fatal(err)
	}
	if s.Capabilities().MultiAppend {
		if err := s.Delete(ctx, pfx+"b", varve.Any); err != nil {
			t.Fatal(err)
		}
	}
	after := readAllPrefix(t, s, start, pfx)
	now := numbers(t, s, after)
	for i, e := range after {
		if i > 0 && now[i] <= now[i-1] {
			t.Fatalf("after removals the event at %s is numbered %d, after %d", e.Position, now[i], now[i-1])
		}
		k := 0
		for before[k].Position != e.Position {
			k++
		}
		if now[i] < old[k] {
			t.Fatalf("the event at %s was numbered %d, and %d after removals", e.Position, old[k], now[i])
		}
		p, err := s.PositionOfNumber(ctx, old[k])
		if err != nil {
			t.Fatal(err)
		}
		if e.Position.Less(p) {
			t.Fatalf("the number %d of the event at %s from before the removals gives %s, after it", old[k], e.Position, p)
		}
	}
	// The positions of removed events have numbers too, in order with
	// the others.
	all := numbers(t, s, before)
	for i := 1; i < len(all); i++ {
		if all[i] < all[i-1] {
			t.Fatalf("the positions %s and %s, some removed, are numbered %d and %d", before[i-1].Position, before[i].Position, all[i-1], all[i])
		}
	}
}

func testNumbersBounds(t *testing.T, s *varve.Store, f Factory) {
	ctx := ctxFor(t)
	mustAppend(t, s, prefix(t)+"s", varve.Any, events("E", 2)...)
	ns, err := s.NumberPositions(ctx, []varve.Position{varve.Start})
	if err != nil || len(ns) != 1 || ns[0] != 0 {
		t.Fatalf("the number of Start: %v, %v", ns, err)
	}
	if ns, err := s.NumberPositions(ctx, nil); err != nil || len(ns) != 0 {
		t.Fatalf("the numbers of no position: %v, %v", ns, err)
	}
	if p, err := s.PositionOfNumber(ctx, 0); err != nil || p != varve.Start {
		t.Fatalf("the position of 0: %s, %v", p, err)
	}
	p, err := s.PositionOfNumber(ctx, varve.MaxPositionNumber)
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Less(last) {
		t.Fatalf("the position of 2^53-1 is %s, before the last event at %s", p, last)
	}
	_, err = s.PositionOfNumber(ctx, varve.MaxPositionNumber+1)
	wantErr(t, "the position of 2^53", err, varve.ErrInvalidArgument)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.NumberPositions(cctx, []varve.Position{last})
	wantErr(t, "numbers with a cancelled context", err, context.Canceled)
	_, err = s.PositionOfNumber(cctx, 1)
	wantErr(t, "a number's position with a cancelled context", err, context.Canceled)
	closed := store(t, f)
	_ = closed.Close()
	_, err = closed.NumberPositions(ctx, []varve.Position{last})
	wantErr(t, "numbers on a closed store", err, varve.ErrClosed)
	_, err = closed.PositionOfNumber(ctx, 1)
	wantErr(t, "a number's position on a closed store", err, varve.ErrClosed)
}
