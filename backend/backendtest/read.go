package backendtest

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

func testReadPaged(t *testing.T, f Factory) {
	s := store(t, f)
	stream := prefix(t) + "paged"
	mustAppend(t, s, stream, varve.NoStream, events("E", 25)...)
	cases := []struct {
		name string
		opts []varve.StreamOption
		want []varve.Version
	}{
		{"forward", nil, seqVersions(1, 25)},
		{"forward/page1", []varve.StreamOption{varve.PageSize(1)}, seqVersions(1, 25)},
		{"forward/page4", []varve.StreamOption{varve.PageSize(4)}, seqVersions(1, 25)},
		{"forward/page25", []varve.StreamOption{varve.PageSize(25)}, seqVersions(1, 25)},
		{"forward/from5/limit3", []varve.StreamOption{varve.From(5), varve.Limit(3)}, seqVersions(5, 7)},
		{"forward/from20/page3", []varve.StreamOption{varve.From(20), varve.PageSize(3)}, seqVersions(20, 25)},
		{"forward/past-end", []varve.StreamOption{varve.From(26)}, nil},
		{"forward/limit-over-end", []varve.StreamOption{varve.From(24), varve.Limit(10)}, seqVersions(24, 25)},
		{"backward", []varve.StreamOption{varve.ReadBackward()}, seqVersions(25, 1)},
		{"backward/page4", []varve.StreamOption{varve.ReadBackward(), varve.PageSize(4)}, seqVersions(25, 1)},
		{"backward/from10", []varve.StreamOption{varve.ReadBackward(), varve.From(10)}, seqVersions(10, 1)},
		{"backward/from10/limit3", []varve.StreamOption{varve.ReadBackward(), varve.From(10), varve.Limit(3)}, seqVersions(10, 8)},
		{"backward/from-past-end", []varve.StreamOption{varve.ReadBackward(), varve.From(100), varve.PageSize(7)}, seqVersions(25, 1)},
		{"backward/limit1", []varve.StreamOption{varve.ReadBackward(), varve.Limit(1)}, []varve.Version{25}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := versions(mustRead(t, s, stream, tc.opts...))
			if !equalVersions(got, tc.want) {
				t.Fatalf("versions %v, want %v", got, tc.want)
			}
		})
	}
	// Stopping an iteration early is allowed and stops reading.
	n := 0
	for _, err := range s.ReadStream(ctxFor(t), stream, varve.PageSize(2)) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("an iteration stopped after 3 events yielded %d", n)
	}
}

func testReadLongStream(t *testing.T, f Factory) {
	s := store(t, f)
	stream := prefix(t) + "long"
	for i := 0; i < 3; i++ {
		mustAppend(t, s, stream, varve.Any, events("E", 500)...)
	}
	got := mustRead(t, s, stream)
	if !equalVersions(versions(got), seqVersions(1, 1500)) {
		t.Fatalf("long read: %d events, not 1..1500 in order", len(got))
	}
	back := mustRead(t, s, stream, varve.ReadBackward())
	if !equalVersions(versions(back), seqVersions(1500, 1)) {
		t.Fatalf("long backward read: %d events, not 1500..1 in order", len(back))
	}
}

func testReadAllOrder(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	start, err := s.LastPosition(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	type appended struct {
		stream string
		evs    []varve.Event
		res    varve.AppendResult
	}
	var all []appended
	for i := range 12 {
		stream := pfx + []string{"a", "b", "c"}[i%3]
		evs := events("E", 1+i%4)
		all = append(all, appended{stream, evs, mustAppend(t, s, stream, varve.Any, evs...)})
	}
	var want []varve.Event
	for _, a := range all {
		want = append(want, a.evs...)
	}
	got := eventually(t, s, start, pfx, len(want))
	if len(got) != len(want) {
		t.Fatalf("$all has %d events of this test, want %d", len(got), len(want))
	}
	for i := range got {
		sameEvent(t, got[i], want[i])
	}
	// Resume after any event: the rest follows, nothing is repeated.
	mid := got[len(got)/2].Position
	rest := readAllPrefix(t, s, mid, pfx)
	if len(rest) != len(got)-len(got)/2-1 || rest[0].ID != got[len(got)/2+1].ID {
		t.Fatalf("resume after %s: %d events, want %d", mid, len(rest), len(got)-len(got)/2-1)
	}
	// Limit and page size bound the read.
	limited, err := collect(s.ReadAll(ctxFor(t), start, varve.Limit(5), varve.PageSize(2)))
	if err != nil || len(limited) != 5 {
		t.Fatalf("limited $all read: %d events, %v", len(limited), err)
	}
	page, err := s.ReadAllPage(ctxFor(t), start, nil, varve.Limit(3))
	if err != nil || len(page.Events) != 3 || page.Through != page.Events[2].Position {
		t.Fatalf("one page of $all: %d events through %s, %v", len(page.Events), page.Through, err)
	}
	// A page after the last event is empty and goes through where it started.
	last := got[len(got)-1].Position
	if _, err := s.ReadAllPage(ctxFor(t), last, nil, varve.Limit(-1)); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("negative limit: %v, want ErrInvalidArgument", err)
	}
	for _, p := range []varve.Position{got[len(got)/2].Position, last} {
		page, err := s.ReadAllPage(ctxFor(t), p, nil)
		if err != nil || (len(page.Events) == 0) != (page.Through == p) || (len(page.Events) > 0 && page.Through != page.Events[len(page.Events)-1].Position) {
			t.Fatalf("page after %s: %d events through %s, %v", p, len(page.Events), page.Through, err)
		}
	}
}

// eventually reads $all after start until it holds n events of the prefix;
// a backend may make a commit readable in $all a moment after it returns,
// and other clients of a shared server may hold $all back a while longer.
func eventually(t testing.TB, s *varve.Store, start varve.Position, pfx string, n int) []varve.RecordedEvent {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := readAllPrefix(t, s, start, pfx)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testLastPosition(t *testing.T, f Factory) {
	s := store(t, f)
	res := mustAppend(t, s, prefix(t)+"last", varve.NoStream, events("E", 2)...)
	waitForPosition(t, s, res.Position)
}

func testStreamInfo(t *testing.T, f Factory) {
	s := store(t, f)
	stream := prefix(t) + "info"
	_, err := s.StreamInfo(ctxFor(t), stream)
	wantErr(t, "info of a new stream", err, varve.ErrStreamNotFound)
	mustAppend(t, s, stream, varve.NoStream, events("E", 3)...)
	first, err := s.StreamInfo(ctxFor(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	res := mustAppend(t, s, stream, varve.Exact(3), events("E", 2)...)
	info, err := s.StreamInfo(ctxFor(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	if info.Stream != stream || info.Version != 5 || info.LastPosition != res.Position || info.Deleted || info.Tombstoned {
		t.Fatalf("info %+v, want version 5 at %s", info, res.Position)
	}
	// The stream was created by the first append and updated by the second,
	// 5ms later.
	if info.CreatedAt.IsZero() || !info.CreatedAt.Equal(first.CreatedAt) || !info.UpdatedAt.After(first.UpdatedAt) || info.UpdatedAt.Before(info.CreatedAt) {
		t.Fatalf("info times: created %v then %v, updated %v then %v", first.CreatedAt, info.CreatedAt, first.UpdatedAt, info.UpdatedAt)
	}
}

// newest keeps the newest position of acknowledged appends, from writers
// that run concurrently: a test waits for it (wait) before it asserts on
// what $all holds.
type newest struct {
	mu  sync.Mutex
	pos varve.Position
}

func (n *newest) add(rs ...varve.AppendResult) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range rs {
		if n.pos.Less(r.Position) {
			n.pos = r.Position
		}
	}
}

// wait waits until $all can return the newest acknowledged append.
func (n *newest) wait(t testing.TB, s *varve.Store) {
	t.Helper()
	n.mu.Lock()
	pos := n.pos
	n.mu.Unlock()
	waitForPosition(t, s, pos)
}

// waitForPosition waits until $all can return the event at pos: a backend
// may make a commit readable there a moment after the append returns, and
// other clients of a shared server may hold it back a while longer.
func waitForPosition(t testing.TB, s *varve.Store, pos varve.Position) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := s.LastPosition(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		if !p.Less(pos) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("$all stays at %s, before a committed append at %s", p, pos)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testReadAllBackward reads $all newest first, whole and page by page,
// filtered and within a byte budget. Other clients of a shared server
// append too: the test keeps the events of its own streams and stops below
// where it began.
func testReadAllBackward(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	start, err := s.LastPosition(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 9 {
		k := 1 + i%3
		mustAppend(t, s, pfx+[]string{"a", "b", "c"}[i%3], varve.Any, events("E", k)...)
		n += k
	}
	fwd := eventually(t, s, start, pfx, n)
	mine := func(from varve.Position, opts ...varve.AllOption) []varve.RecordedEvent {
		t.Helper()
		var out []varve.RecordedEvent
		last := varve.Position{}
		for e, err := range s.ReadAll(ctxFor(t), from, append(opts, varve.ReadBackward())...) {
			if err != nil {
				t.Fatalf("read $all backward before %s: %v", from, err)
			}
			if !last.IsZero() && !e.Position.Less(last) {
				t.Fatalf("backward $all not newest first: %s after %s", e.Position, last)
			}
			if !from.IsZero() && !e.Position.Less(from) {
				t.Fatalf("backward $all before %s returned %s", from, e.Position)
			}
			if !start.Less(e.Position) {
				break
			}
			last = e.Position
			if strings.HasPrefix(e.Stream, pfx) {
				out = append(out, e)
			}
		}
		return out
	}
	reversed := func(evs []varve.RecordedEvent) []varve.RecordedEvent {
		out := slices.Clone(evs)
		slices.Reverse(out)
		return out
	}
	same := func(what string, got, want []varve.RecordedEvent) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Position != want[i].Position || got[i].Stream != want[i].Stream || got[i].Version != want[i].Version ||
				!bytes.Equal(got[i].Data, want[i].Data) {
				t.Fatalf("%s: event %d is %s v%d at %s, want %s v%d at %s", what, i, got[i].Stream, got[i].Version, got[i].Position,
					want[i].Stream, want[i].Version, want[i].Position)
			}
		}
	}
	same("from the end", mine(varve.Start), reversed(fwd))
	mid := len(fwd) / 2
	same("before the middle", mine(fwd[mid].Position, varve.PageSize(2)), reversed(fwd[:mid]))
	same("by pages of one", mine(fwd[len(fwd)-1].Position, varve.PageSize(1)), reversed(fwd[:len(fwd)-1]))
	var wantA []varve.RecordedEvent
	for _, e := range fwd {
		if e.Stream == pfx+"a" {
			wantA = append(wantA, e)
		}
	}
	// The filter's matches are this test's alone, so a read limited to
	// their count ends at the last of them, however long the log below is.
	filtered, err := collect(s.ReadAll(ctxFor(t), varve.Start, varve.Filter{StreamPrefixes: []string{pfx + "a"}}, varve.ReadBackward(),
		varve.Limit(len(wantA)), varve.PageSize(2)))
	if err != nil {
		t.Fatalf("filtered backward read: %v", err)
	}
	same("filtered", filtered, reversed(wantA))

	// Other clients' events may lie between this test's: a page is checked
	// by its positions.
	page, err := s.ReadAllPage(ctxFor(t), fwd[mid].Position, nil, varve.ReadBackward(), varve.Limit(3))
	if err != nil || !page.Full || len(page.Events) != 3 || page.Through != page.Events[2].Position ||
		!page.Events[0].Position.Less(fwd[mid].Position) || page.Events[0].Position.Less(fwd[mid-1].Position) ||
		!page.Events[1].Position.Less(page.Events[0].Position) || !page.Events[2].Position.Less(page.Events[1].Position) {
		t.Fatalf("a backward page of 3 before %s: %d events through %s, full %v, %v", fwd[mid].Position, len(page.Events), page.Through, page.Full, err)
	}
	page, err = s.ReadAllPage(ctxFor(t), fwd[mid].Position, nil, varve.ReadBackward(), varve.PageBytes(1))
	if err != nil || !page.Full || len(page.Events) != 1 || !page.Events[0].Position.Less(fwd[mid].Position) || page.Events[0].Position.Less(fwd[mid-1].Position) {
		t.Fatalf("a backward page of 1 byte before %s: %d events, full %v, %v", fwd[mid].Position, len(page.Events), page.Full, err)
	}
	// Before the log's first event there is nothing: the page is not full.
	first, err := s.ReadAllPage(ctxFor(t), varve.Start, nil, varve.Limit(1))
	if err != nil || len(first.Events) != 1 {
		t.Fatalf("the first event of $all: %d events, %v", len(first.Events), err)
	}
	page, err = s.ReadAllPage(ctxFor(t), first.Events[0].Position, nil, varve.ReadBackward())
	if err != nil || page.Full || len(page.Events) != 0 || page.Through != first.Events[0].Position {
		t.Fatalf("a backward page before the first event %s: %d events through %s, full %v, %v",
			first.Events[0].Position, len(page.Events), page.Through, page.Full, err)
	}
}
