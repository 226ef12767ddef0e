package backendtest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/workload"
)

// testFilteredRead holds filtered reads of $all to the reference, the
// Store filtering full pages itself: on a random log of streams in three
// categories with three event types, with deletions, truncations and
// tombstones in between, every filter gives the same events in the same
// order, through [varve.Store.ReadAll] and page by page with pages of 1, 7
// and 100 events. A page's Through never goes back, is at least its last
// event, and a page that is not full goes through the last matching event;
// reading on from it finds nothing more.
func testFilteredRead(t *testing.T, f Factory) {
	ctx := ctxFor(t)
	s := store(t, f)
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Categories and types of this run only: other tests share the server.
	var b [4]byte
	_, _ = rand.Read(b[:])
	u := "flt" + hex.EncodeToString(b[:])
	cats := []string{u + "a", u + "b", u + "c"}
	types := []string{u + "T1", u + "T2", u + "T3"}
	rng := mrand.New(mrand.NewPCG(7, uint64(time.Now().UnixNano())))
	var streams []string
	for i := range 18 {
		streams = append(streams, fmt.Sprintf("%s-%d", cats[i%3], i))
	}
	gone := map[string]bool{}
	for range 260 {
		k := rng.IntN(len(streams))
		st := streams[k]
		if gone[st] {
			continue
		}
		switch r := rng.IntN(40); {
		case r == 0 && k%2 == 1: // streams of even index stay, for the last events below
			if err := s.Tombstone(ctx, st, varve.Any); err != nil {
				t.Fatalf("tombstone %s: %v", st, err)
			}
			gone[st] = true
			continue
		case r < 3:
			if err := s.Delete(ctx, st, varve.Any); err != nil && !isNotFound(err) {
				t.Fatalf("delete %s: %v", st, err)
			}
			continue
		case r < 5:
			if err := s.Truncate(ctx, st, varve.Version(1+rng.IntN(6))); err != nil && !isNotFound(err) {
				t.Fatalf("truncate %s: %v", st, err)
			}
			continue
		}
		evs := make([]varve.Event, 1+rng.IntN(4))
		for i := range evs {
			evs[i] = varve.NewEvent(types[rng.IntN(len(types))], []byte(`{}`))
		}
		mustAppend(t, s, st, varve.Any, evs...)
	}
	// A last event in each stream left, of every category and type pair.
	var last varve.Position
	for i, st := range streams {
		if !gone[st] {
			if res := mustAppend(t, s, st, varve.Any, varve.NewEvent(types[(i/3)%3], []byte(`{}`))); last.Less(res.Position) {
				last = res.Position
			}
		}
	}
	// The reference must hold every event of the run: other clients of a
	// shared server may hold $all back a while (PostgreSQL's horizon).
	waitForPosition(t, s, last)

	filters := []varve.Filter{
		{Categories: cats[:1]},
		{Categories: []string{cats[2], cats[0], cats[2]}},
		{Types: types[1:2]},
		{Types: []string{types[0], types[2]}},
		{Categories: cats[1:], Types: types[:1]},
		{StreamPrefixes: []string{cats[0] + "-1"}},
		{StreamPrefixes: []string{cats[0] + "-1", cats[1] + "-"}, Types: types[1:]},
		{StreamPrefixes: []string{u}},
		{StreamPrefixes: []string{u}, Types: types[2:]},
		{Categories: cats[:1], StreamPrefixes: []string{cats[1] + "-1"}},
		{Categories: []string{u + "none"}},
	}
	all, err := collect(s.ReadAll(ctx, start))
	if err != nil {
		t.Fatal(err)
	}
	for k, flt := range filters {
		var want []string
		for i := range all {
			if flt.Match(&all[i], varve.DefaultCategorySeparator) {
				want = append(want, describe(&all[i]))
			}
		}
		// The last two filters match nothing; the others must match some
		// events of the log, or the comparison proves little.
		if empty := k >= len(filters)-2; empty != (len(want) == 0) {
			t.Fatalf("%v: the reference holds %d events", flt, len(want))
		}
		name := fmt.Sprintf("%v", flt)
		// A context of its own: each read may scan the shared log, slowly
		// on a busy machine.
		got, err := collect(s.ReadAll(ctxFor(t), start, flt, varve.PageSize(5)))
		if err != nil {
			t.Fatalf("%s: ReadAll: %v", name, err)
		}
		if d := diff(want, describeAll(got)); d != "" {
			t.Errorf("%s: ReadAll differs from the reference: %s", name, d)
		}
		for _, size := range []int{1, 7, 100} {
			for _, ref := range []bool{false, true} {
				got := readFilteredPaged(t, s, start, flt, size, ref)
				if d := diff(want, got); d != "" {
					t.Errorf("%s, pages of %d (reference scan %v): %s", name, size, ref, d)
				}
			}
		}
	}
	if lacks(t, f, s, varve.Capabilities{Filter: true}) {
		t.Logf("%s filters pages in the Store (no varve.FilteredReader)", s.Features().Name)
	}
}

// readFilteredPaged reads the events after start that match flt, a page
// at a time, and checks each page's Through.
func readFilteredPaged(t *testing.T, s *varve.Store, start varve.Position, flt varve.Filter, size int, reference bool) []string {
	t.Helper()
	ctx := ctxFor(t)
	if reference {
		scan, err := workload.Scanning(s)
		if err != nil {
			t.Fatal(err)
		}
		defer scan.Close()
		s = scan
	}
	var out []string
	pos := start
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatalf("%v: no end after %d pages", flt, pages)
		}
		var page varve.AllPage
		var err error
		page, err = s.ReadAllPage(ctx, pos, nil, flt, varve.Limit(size))
		if err != nil {
			t.Fatalf("%v: page after %s: %v", flt, pos, err)
		}
		if page.Through.Less(pos) {
			t.Fatalf("%v: page after %s goes back to %s", flt, pos, page.Through)
		}
		for i := range page.Events {
			e := &page.Events[i]
			if !pos.Less(e.Position) || page.Through.Less(e.Position) {
				t.Fatalf("%v: page after %s through %s holds %s", flt, pos, page.Through, describe(e))
			}
			if !flt.Match(e, varve.DefaultCategorySeparator) {
				t.Fatalf("%v: page holds %s, which does not match", flt, describe(e))
			}
			out = append(out, describe(e))
		}
		if n := len(page.Events); n == size && page.Through != page.Events[n-1].Position {
			t.Fatalf("%v: full page goes through %s, not its last event %s", flt, page.Through, page.Events[n-1].Position)
		}
		pos = page.Through
		if len(page.Events) < size {
			break
		}
	}
	// Nothing that matches follows the end of the read.
	rest, err := s.ReadAllPage(ctx, pos, nil, flt)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Events) > 0 {
		t.Fatalf("%v: after the end at %s, %s", flt, pos, describe(&rest.Events[0]))
	}
	return out
}

func describe(e *varve.RecordedEvent) string {
	return fmt.Sprintf("%s@%d(%s) at %s", e.Stream, e.Version, e.ID, e.Position)
}

func describeAll(evs []varve.RecordedEvent) []string {
	out := make([]string, len(evs))
	for i := range evs {
		out[i] = describe(&evs[i])
	}
	return out
}

// diff describes the first difference of two lists of events.
func diff(want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			return fmt.Sprintf("event %d of %d/%d: want %s, got %s", i, len(want), len(got), want[i], got[i])
		}
	}
	return fmt.Sprintf("want %d events, got %d", len(want), len(got))
}

func isNotFound(err error) bool { return errors.Is(err, varve.ErrStreamNotFound) }
