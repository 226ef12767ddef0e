package backendtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// testDCB holds Dynamic Consistency Boundaries to their promise on
// backends that keep tags: tags round-trip, a query read gives what the
// query matches (the reference is Query.Match over $all), an append's
// condition fails on a matching event after its position and writes
// nothing then, and of writers racing to claim one tag exactly one wins,
// while writers on tags of their own never fail.
func testDCB(t *testing.T, f Factory) {
	s := store(t, f)
	if lacks(t, f, s, varve.Capabilities{Tags: true}) {
		_, err := s.Append(ctxFor(t), prefix(t)+"a", varve.Any, varve.Event{Type: "E", Tags: []string{"t"}})
		wantErr(t, "an event with tags without the capability", err, varve.ErrNotSupported)
		_, err = s.AppendIf(ctxFor(t), prefix(t)+"a", varve.Any, varve.AppendCondition{}, varve.Event{Type: "E"})
		wantErr(t, "a conditional append without the capability", err, varve.ErrNotSupported)
		t.Skipf("%s keeps no tags", s.Features().Name)
	}
	t.Run("Query", func(t *testing.T) { t.Parallel(); testDCBQuery(t, s) })
	t.Run("Condition", func(t *testing.T) { t.Parallel(); testDCBCondition(t, s) })
	t.Run("Race", func(t *testing.T) { t.Parallel(); testDCBRace(t, s) })
	t.Run("BadInput", func(t *testing.T) { t.Parallel(); testDCBBadInput(t, s) })
}

func tagged(typ string, tags ...string) varve.Event {
	e := varve.NewEvent(typ, []byte(`{}`))
	e.Tags = tags
	return e
}

func testDCBQuery(t *testing.T, s *varve.Store) {
	ctx := ctxFor(t)
	pfx := prefix(t)
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u := strings.ReplaceAll(pfx, "-", "")
	types := []string{u + "A", u + "B", u + "C"}
	tags := []string{u + "x", u + "y", u + "z", u + "w"}
	rng := rand.New(rand.NewPCG(9, uint64(time.Now().UnixNano())))
	var last varve.Position
	for i := range 120 {
		var ts []string
		for _, tg := range tags {
			if rng.IntN(3) == 0 {
				ts = append(ts, tg)
			}
		}
		last = mustAppend(t, s, fmt.Sprintf("%ss-%d", pfx, i%7), varve.Any, tagged(types[rng.IntN(3)], ts...)).Position
	}
	// $all may hold its newest events back a while (PostgreSQL's horizon,
	// behind the writers of the tests beside this one): the reference is
	// read once it shows them all.
	if err := s.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	all, err := collect(s.ReadAll(ctx, start))
	if err != nil {
		t.Fatal(err)
	}
	// Tags come back as they were appended, from every read.
	for _, e := range all {
		if strings.HasPrefix(e.Stream, pfx) {
			ev := mustRead(t, s, e.Stream, varve.From(e.Version), varve.Limit(1))
			if !slices.Equal(ev[0].Tags, e.Tags) {
				t.Fatalf("%s@%d: tags %v in the stream, %v in $all", e.Stream, e.Version, ev[0].Tags, e.Tags)
			}
		}
	}
	queries := []varve.Query{
		{Items: []varve.QueryItem{{Tags: tags[:1]}}},
		{Items: []varve.QueryItem{{Tags: tags[:2]}}},
		{Items: []varve.QueryItem{{Types: types[:1]}}},
		{Items: []varve.QueryItem{{Types: types[1:], Tags: tags[2:3]}}},
		{Items: []varve.QueryItem{{Tags: tags[:1]}, {Tags: tags[1:2]}, {Types: types[2:]}}},
		{Items: []varve.QueryItem{{Types: types[:1], Tags: tags[:3]}, {Types: types[1:2], Tags: tags[3:]}}},
		{Items: []varve.QueryItem{{Tags: []string{u + "none"}}}},
	}
	for k, q := range queries {
		var want []string
		for i := range all {
			if q.Match(&all[i]) {
				want = append(want, describe(&all[i]))
			}
		}
		if (len(want) == 0) != (k == len(queries)-1) {
			t.Fatalf("%v: the reference holds %d events", q, len(want))
		}
		got, err := collect(s.ReadQuery(ctx, q, start, varve.PageSize(4)))
		if err != nil {
			t.Fatal(err)
		}
		if d := diff(want, describeAll(got)); d != "" {
			t.Errorf("%v: ReadQuery differs from the reference: %s", q, d)
		}
		var paged []string
		pos := start
		for {
			page, err := s.ReadQueryPage(ctx, q, pos, nil, varve.Limit(3))
			if err != nil {
				t.Fatal(err)
			}
			if page.Through.Less(pos) {
				t.Fatalf("%v: page after %s goes back to %s", q, pos, page.Through)
			}
			paged = append(paged, describeAll(page.Events)...)
			pos = page.Through
			if !page.Full {
				break
			}
		}
		if d := diff(want, paged); d != "" {
			t.Errorf("%v: pages of 3 differ from the reference: %s", q, d)
		}
	}
}

func testDCBCondition(t *testing.T, s *varve.Store) {
	ctx := ctxFor(t)
	pfx := prefix(t)
	u := strings.ReplaceAll(pfx, "-", "")
	course := varve.Query{Items: []varve.QueryItem{{Tags: []string{u + "course:c1"}}}}
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.AppendIf(ctx, pfx+"c1", varve.NoStream, varve.AppendCondition{FailIfEventsMatch: course, After: start},
		tagged("CourseDefined", u+"course:c1"))
	if err != nil {
		t.Fatalf("first append under its condition: %v", err)
	}
	// A decision made before the first append is stale now.
	stale := tagged("CourseRenamed", u+"course:c1")
	_, err = s.AppendIf(ctx, pfx+"c1-names", varve.Any, varve.AppendCondition{FailIfEventsMatch: course, After: start}, stale)
	wantErr(t, "append on a stale decision", err, varve.ErrAppendConditionFailed)
	var ce *varve.AppendConditionError
	if !errors.As(err, &ce) || ce.Position != first.Position {
		t.Fatalf("condition error %v does not carry the position %s of the matching event", err, first.Position)
	}
	if !varve.IsRetryable(err) {
		t.Fatalf("a failed condition is not retryable: %v", err)
	}
	if _, err := s.StreamInfo(ctx, pfx+"c1-names"); !errors.Is(err, varve.ErrStreamNotFound) {
		t.Fatalf("a failed conditional append wrote (%v)", err)
	}
	// Decided on everything up to the first append: it goes through, and
	// an unrelated event does not fail a condition.
	mustAppend(t, s, pfx+"other", varve.Any, tagged("CourseDefined", u+"course:c2"))
	res, err := s.AppendIf(ctx, pfx+"c1-names", varve.Any, varve.AppendCondition{FailIfEventsMatch: course, After: first.Position}, stale)
	if err != nil {
		t.Fatalf("append on a fresh decision: %v", err)
	}
	// Its retry returns the original result, whatever the condition says.
	again, err := s.AppendIf(ctx, pfx+"c1-names", varve.Any, varve.AppendCondition{FailIfEventsMatch: course, After: first.Position}, stale)
	if err != nil || again != res {
		t.Fatalf("retry: %+v %v, want %+v", again, err, res)
	}
	// A condition of types only, and of every event.
	_, err = s.AppendIf(ctx, pfx+"x", varve.Any, varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Types: []string{"CourseDefined"}}}}, After: start},
		tagged("E"))
	wantErr(t, "condition on a type", err, varve.ErrAppendConditionFailed)
	_, err = s.AppendIf(ctx, pfx+"x", varve.Any, varve.AppendCondition{After: start}, tagged("E"))
	wantErr(t, "condition on every event", err, varve.ErrAppendConditionFailed)
}

// testDCBRace: 6 writers at a time try to claim each of 8 user names: each
// reads the name's events, and appends its claim on the condition that
// none came after what it read. Exactly one claim of each name wins.
// Meanwhile 3 writers claim names of their own, which never fails.
func testDCBRace(t *testing.T, s *varve.Store) {
	ctx := ctxFor(t)
	pfx := prefix(t)
	u := strings.ReplaceAll(pfx, "-", "")
	var won newest // of the claims
	claim := func(name, stream string) (bool, error) {
		q := varve.Query{Items: []varve.QueryItem{{Types: []string{"NameClaimed"}, Tags: []string{u + "name:" + name}}}}
		pos, taken := varve.Start, false
		for {
			page, err := s.ReadQueryPage(ctx, q, pos, nil)
			if err != nil {
				return false, err
			}
			taken = taken || len(page.Events) > 0
			pos = page.Through
			if !page.Full {
				break
			}
		}
		if taken {
			return false, nil
		}
		res, err := s.AppendIf(ctx, stream, varve.Any, varve.AppendCondition{FailIfEventsMatch: q, After: pos}, tagged("NameClaimed", u+"name:"+name))
		if errors.Is(err, varve.ErrAppendConditionFailed) {
			return false, nil
		}
		if err == nil {
			won.add(res)
		}
		return err == nil, err
	}
	var wins [8]atomic.Int32
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for n := range wins {
				ok, err := claim(fmt.Sprint("n", n), fmt.Sprintf("%suser-%d-%d", pfx, w, n))
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if ok {
					wins[n].Add(1)
				}
			}
		})
	}
	for w := range 3 {
		wg.Go(func() {
			for n := range 8 {
				ok, err := claim(fmt.Sprintf("own-%d-%d", w, n), fmt.Sprintf("%sown-%d", pfx, w))
				if err != nil || !ok {
					t.Errorf("claim of a name of its own: %v %v", ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for n := range wins {
		if got := wins[n].Load(); got != 1 {
			t.Errorf("name n%d claimed %d times", n, got)
		}
	}
	// The store agrees: one claim event per name. Query reads stop at
	// $all's horizon, which may hold a claim back a while (PostgreSQL,
	// behind a writer of another test).
	won.wait(t, s)
	for n := range wins {
		q := varve.Query{Items: []varve.QueryItem{{Tags: []string{u + "name:" + fmt.Sprint("n", n)}}}}
		evs, err := collect(s.ReadQuery(ctx, q, varve.Start))
		if err != nil || len(evs) != 1 {
			t.Errorf("name n%d: %d claim events in the store (%v)", n, len(evs), err)
		}
	}
}

func testDCBBadInput(t *testing.T, s *varve.Store) {
	ctx := ctxFor(t)
	pfx := prefix(t)
	many := make([]string, varve.MaxEventTags+1)
	for i := range many {
		many[i] = fmt.Sprint("t", i)
	}
	for _, e := range []varve.Event{
		tagged("E", ""), tagged("E", "a\x00"), tagged("E", strings.Repeat("t", varve.MaxTagLen+1)), tagged("E", many...),
	} {
		_, err := s.Append(ctx, pfx+"a", varve.Any, e)
		wantErr(t, fmt.Sprintf("tags %q", e.Tags), err, varve.ErrInvalidArgument)
	}
	for _, q := range []varve.Query{
		{Items: []varve.QueryItem{{}}},
		{Items: []varve.QueryItem{{Tags: []string{""}}}},
		{Items: []varve.QueryItem{{Types: []string{""}}}},
	} {
		_, err := s.AppendIf(ctx, pfx+"a", varve.Any, varve.AppendCondition{FailIfEventsMatch: q}, tagged("E"))
		wantErr(t, fmt.Sprintf("condition %v", q), err, varve.ErrInvalidArgument)
		_, err = s.ReadQueryPage(ctx, q, varve.Start, nil)
		wantErr(t, fmt.Sprintf("query %v", q), err, varve.ErrInvalidArgument)
	}
	if _, err := s.StreamInfo(ctx, pfx+"a"); !errors.Is(err, varve.ErrStreamNotFound) {
		t.Fatalf("a refused append wrote (%v)", err)
	}
}
