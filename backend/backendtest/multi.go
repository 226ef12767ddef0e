package backendtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// testMultiAppend holds atomic appends to several streams to their
// promise on backends that declare them: every part commits or none does,
// a conflict names the stream that failed, checks of streams not written
// count, retries are idempotent, and concurrent transfers between
// overlapping accounts leave no trace of the losers, while appends to
// disjoint streams never conflict.
func testMultiAppend(t *testing.T, f Factory) {
	s := store(t, f)
	if lacks(t, f, s, varve.Capabilities{MultiAppend: true}) {
		_, err := s.AppendMulti(ctxFor(t), []varve.StreamAppend{{Stream: prefix(t) + "a", Expected: varve.Any, Events: events("E", 1)}})
		wantErr(t, "multi-stream append without the capability", err, varve.ErrNotSupported)
		t.Skipf("%s does not append to several streams atomically", s.Features().Name)
	}
	t.Run("Atomic", func(t *testing.T) { t.Parallel(); testMultiAtomic(t, s) })
	t.Run("BadInput", func(t *testing.T) { t.Parallel(); testMultiBadInput(t, s) })
	t.Run("Transfers", func(t *testing.T) { t.Parallel(); testMultiTransfers(t, s) })
}

func appendParts(streams []string, exp []varve.ExpectedVersion, n int) []varve.StreamAppend {
	parts := make([]varve.StreamAppend, len(streams))
	for i := range streams {
		parts[i] = varve.StreamAppend{Stream: streams[i], Expected: exp[i], Events: events("Moved", n)}
	}
	return parts
}

func testMultiAtomic(t *testing.T, s *varve.Store) {
	ctx := ctxFor(t)
	pfx := prefix(t)
	a, b, c, d := pfx+"a", pfx+"b", pfx+"c", pfx+"d"
	mustAppend(t, s, c, varve.NoStream, events("Opened", 2)...)
	mustAppend(t, s, d, varve.NoStream, events("Opened", 1)...)
	if err := s.Tombstone(ctx, d, varve.Any); err != nil {
		t.Fatal(err)
	}

	parts := appendParts([]string{a, b}, []varve.ExpectedVersion{varve.NoStream, varve.NoStream}, 2)
	res, err := s.AppendMulti(ctx, parts, varve.StreamCheck{Stream: c, Expected: varve.Exact(2)}, varve.StreamCheck{Stream: pfx + "none", Expected: varve.NoStream})
	if err != nil {
		t.Fatalf("append to two streams: %v", err)
	}
	if len(res) != 2 || res[0].FirstVersion != 1 || res[0].LastVersion != 2 || res[1].LastVersion != 2 || !res[0].Position.Less(res[1].Position) {
		t.Fatalf("results %+v", res)
	}
	for i, st := range []string{a, b} {
		if got := versions(mustRead(t, s, st)); len(got) != 2 || mustRead(t, s, st)[1].Position != res[i].Position {
			t.Fatalf("%s holds versions %v", st, got)
		}
	}

	// A retry returns the original results and writes nothing.
	again, err := s.AppendMulti(ctx, parts, varve.StreamCheck{Stream: c, Expected: varve.Exact(2)})
	if err != nil || len(again) != 2 || again[0] != res[0] || again[1] != res[1] {
		t.Fatalf("retry: %+v, %v; want %+v", again, err, res)
	}
	if n := len(mustRead(t, s, a)); n != 2 {
		t.Fatalf("retry wrote: %s has %d events", a, n)
	}
	// Half a retry is a duplicate.
	half := []varve.StreamAppend{parts[0], {Stream: pfx + "e", Expected: varve.Any, Events: events("Moved", 1)}}
	_, err = s.AppendMulti(ctx, half)
	wantErr(t, "append that repeats one stream's events", err, varve.ErrDuplicateEvent)
	var se *varve.StreamError
	if !errors.As(err, &se) || se.Stream != a {
		t.Fatalf("duplicate does not name %s: %v", a, err)
	}

	cases := []struct {
		name   string
		parts  []varve.StreamAppend
		checks []varve.StreamCheck
		stream string
		want   error
	}{
		{"conflict on the second stream", appendParts([]string{pfx + "f", a}, []varve.ExpectedVersion{varve.NoStream, varve.Exact(1)}, 1), nil, a, varve.ErrWrongExpectedVersion},
		{"conflict on a check", appendParts([]string{pfx + "f"}, []varve.ExpectedVersion{varve.Any}, 1), []varve.StreamCheck{{Stream: c, Expected: varve.Exact(1)}}, c, varve.ErrWrongExpectedVersion},
		{"check of a stream that exists", appendParts([]string{pfx + "f"}, []varve.ExpectedVersion{varve.Any}, 1), []varve.StreamCheck{{Stream: c, Expected: varve.NoStream}}, c, varve.ErrWrongExpectedVersion},
		{"check that a missing stream exists", appendParts([]string{pfx + "f"}, []varve.ExpectedVersion{varve.Any}, 1), []varve.StreamCheck{{Stream: pfx + "none", Expected: varve.StreamExists}}, pfx + "none", varve.ErrWrongExpectedVersion},
		{"tombstoned stream", appendParts([]string{pfx + "f", d}, []varve.ExpectedVersion{varve.Any, varve.Any}, 1), nil, d, varve.ErrStreamDeleted},
	}
	for _, tc := range cases {
		_, err := s.AppendMulti(ctx, tc.parts, tc.checks...)
		wantErr(t, tc.name, err, tc.want)
		var wev *varve.WrongExpectedVersionError
		if errors.As(err, &wev) && wev.Stream != tc.stream || errors.As(err, &se) && se.Stream != tc.stream {
			t.Errorf("%s: the error names another stream than %s: %v", tc.name, tc.stream, err)
		}
		if _, err := s.StreamInfo(ctx, pfx+"f"); !errors.Is(err, varve.ErrStreamNotFound) {
			t.Fatalf("%s: the part that did not fail was written (%v)", tc.name, err)
		}
	}
}

func testMultiBadInput(t *testing.T, s *varve.Store) {
	ctx := ctxFor(t)
	pfx := prefix(t)
	dup := events("E", 1)
	cases := []struct {
		name   string
		parts  []varve.StreamAppend
		checks []varve.StreamCheck
	}{
		{"no part", nil, nil},
		{"a part without events", []varve.StreamAppend{{Stream: pfx + "a", Expected: varve.Any}}, nil},
		{"a stream twice", appendParts([]string{pfx + "a", pfx + "a"}, []varve.ExpectedVersion{varve.Any, varve.Any}, 1), nil},
		{"a written stream checked", appendParts([]string{pfx + "a"}, []varve.ExpectedVersion{varve.Any}, 1), []varve.StreamCheck{{Stream: pfx + "a", Expected: varve.NoStream}}},
		{"a check of any version", appendParts([]string{pfx + "a"}, []varve.ExpectedVersion{varve.Any}, 1), []varve.StreamCheck{{Stream: pfx + "b", Expected: varve.Any}}},
		{"an id in two parts", []varve.StreamAppend{{Stream: pfx + "a", Expected: varve.Any, Events: dup}, {Stream: pfx + "b", Expected: varve.Any, Events: dup}}, nil},
		{"a system stream", appendParts([]string{pfx + "a", "$sys"}, []varve.ExpectedVersion{varve.Any, varve.Any}, 1), nil},
		{"a bad expected version", appendParts([]string{pfx + "a"}, []varve.ExpectedVersion{-7}, 1), nil},
		{"an empty type", []varve.StreamAppend{{Stream: pfx + "a", Expected: varve.Any, Events: []varve.Event{{Type: ""}}}}, nil},
	}
	for _, tc := range cases {
		_, err := s.AppendMulti(ctx, tc.parts, tc.checks...)
		wantErr(t, tc.name, err, varve.ErrInvalidArgument)
	}
	if _, err := s.StreamInfo(ctx, pfx+"a"); !errors.Is(err, varve.ErrStreamNotFound) {
		t.Fatalf("a refused append wrote (%v)", err)
	}
}

// testMultiTransfers moves money between 6 accounts from 8 writers: each
// reads two accounts' versions and appends a debit and a credit at them,
// while 2 writers append fees to the same accounts one event at a time.
// Every acknowledged transfer is on both accounts, no loser's event is
// anywhere, and each account's events are in version order in $all.
// Writers on accounts of their own never conflict.
func testMultiTransfers(t *testing.T, s *varve.Store) {
	ctx := ctxFor(t)
	pfx := prefix(t)
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const accounts, writers, tries = 6, 8, 25
	name := func(i int) string { return fmt.Sprintf("%sacct-%d", pfx, i) }
	var mu sync.Mutex
	won := map[string]int{} // event ids of acknowledged transfers -> count
	lost := map[string]bool{}
	conflicts := 0
	var acked newest
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for range tries {
				x, y := rng.IntN(accounts), rng.IntN(accounts-1)
				if y >= x {
					y++
				}
				exp := make([]varve.ExpectedVersion, 2)
				for i, a := range []int{x, y} {
					info, err := s.StreamInfo(ctx, name(a))
					switch {
					case errors.Is(err, varve.ErrStreamNotFound):
						exp[i] = varve.NoStream
					case err != nil:
						t.Error(err)
						return
					default:
						exp[i] = varve.Exact(info.Version)
					}
				}
				parts := appendParts([]string{name(x), name(y)}, exp, 1)
				res, err := s.AppendMulti(ctx, parts)
				mu.Lock()
				switch {
				case err == nil:
					acked.add(res...)
					won[parts[0].Events[0].ID.String()]++
					won[parts[1].Events[0].ID.String()]++
				case errors.Is(err, varve.ErrWrongExpectedVersion):
					conflicts++
					lost[parts[0].Events[0].ID.String()] = true
					lost[parts[1].Events[0].ID.String()] = true
				default:
					t.Errorf("transfer: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	// Single appends to the same accounts, by each backend's own path.
	for w := range 2 {
		wg.Go(func() {
			for i := range tries {
				evs := events("Fee", 1)
				res, err := s.Append(ctx, name((w+i)%accounts), varve.Any, evs...)
				if err != nil {
					t.Errorf("single append: %v", err)
					return
				}
				mu.Lock()
				acked.add(res)
				won[evs[0].ID.String()]++
				mu.Unlock()
			}
		})
	}
	// Disjoint writers: each on two accounts of its own.
	for w := range 4 {
		wg.Go(func() {
			var exp [2]varve.Version
			for range tries {
				parts := appendParts([]string{fmt.Sprintf("%sown-%d-a", pfx, w), fmt.Sprintf("%sown-%d-b", pfx, w)},
					[]varve.ExpectedVersion{varve.Exact(exp[0]), varve.Exact(exp[1])}, 2)
				res, err := s.AppendMulti(ctx, parts)
				if err != nil {
					t.Errorf("disjoint writer %d: %v", w, err)
					return
				}
				acked.add(res...)
				exp[0], exp[1] = res[0].LastVersion, res[1].LastVersion
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(won) <= 2*tries {
		t.Fatal("no transfer won")
	}
	// $all may hold an acknowledged commit back while a writer of another
	// test on the same server is in flight.
	acked.wait(t, s)
	last := map[string]varve.Version{}
	seen := map[string]int{}
	for e, err := range s.ReadAll(ctx, start) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(e.Stream, pfx) {
			continue
		}
		if e.Version != last[e.Stream]+1 {
			t.Fatalf("$all holds %s@%d after version %d", e.Stream, e.Version, last[e.Stream])
		}
		last[e.Stream] = e.Version
		id := e.ID.String()
		if lost[id] {
			t.Fatalf("the event %s of a lost transfer is in %s", id, e.Stream)
		}
		seen[id]++
	}
	for id, n := range won {
		if seen[id] != n {
			t.Fatalf("event %s of an acknowledged transfer seen %d times", id, seen[id])
		}
	}
	t.Logf("%d transfers won, %d conflicts", (len(won)-2*tries)/2, conflicts)
}
