package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// TestFilterPlans shows that a filtered page is a range scan of the
// category or type index that starts after the page's position, not a
// filter over a scan of $all: on a log of 20,000 events where the filter
// matches 1%, the plan names the index, bounds it by (tx, seq), and reads
// no more rows than the page holds. A page of stream prefixes walks $all
// in order from the position and stops at the page's end.
func TestFilterPlans(t *testing.T) {
	ctx := context.Background()
	cfg := config(t, testSchema+"_plans")
	b := open(t, cfg)
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		evs := make([]varve.Event, 100)
		for k := range evs {
			typ := "Common"
			if k == 0 {
				typ = "Rare"
			}
			evs[k] = varve.NewEvent(typ, []byte(`{}`))
		}
		cat := "bulk"
		if i%2 == 0 {
			cat = "other"
		}
		if _, err := s.Append(ctx, fmt.Sprintf("%s-%d", cat, i), varve.NoStream, evs...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		if _, err := s.Append(ctx, fmt.Sprintf("rare-%d", i), varve.NoStream, varve.NewEvent("Common", nil)); err != nil {
			t.Fatal(err)
		}
	}
	conn := testConn(t, cfg.ConnString)
	explain := func(t *testing.T, sql string, args ...any) string {
		t.Helper()
		rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		t.Logf("plan:\n%s", plan)
		return plan
	}
	byCat, byType, byPrefix := postgres.FilterQueries(b)
	inc := postgres.Incarnation(b)
	// Before the table's first ANALYZE the planner takes a prefix or a
	// type for a rare one; given the bare condition it read every event of
	// the range after the position and sorted them for the page (4-5 ms a
	// page of 4 at 20,000 events, against 0.02 ms for the walk in order).
	for _, tc := range []struct {
		name, sql, index, sort string
		args                   []any
	}{
		{"a prefix", byPrefix, "events_pkey", "Sort Key: e.tx", []any{int64(0), int64(0), 4, []string{"bulk-"}, int64(1) << 62, inc}},
		{"a category and a prefix", byCat, "events_category", "Sort Key: e.category", []any{int64(0), int64(0), 4, []string{"bulk"}, nil, []string{"bulk-"}, int64(1) << 62, inc}},
		{"a category and a type", byCat, "events_category", "Sort Key: e.category", []any{int64(0), int64(0), 4, []string{"bulk"}, []string{"Common"}, nil, int64(1) << 62, inc}},
	} {
		t.Run(tc.name+" before ANALYZE", func(t *testing.T) {
			plan := explain(t, tc.sql, tc.args...)
			if !strings.Contains(plan, "Index Scan using "+tc.index) || strings.Contains(plan, tc.sort) || strings.Contains(plan, "Bitmap") {
				t.Fatalf("the page does not walk %s in order", tc.index)
			}
		})
	}
	if _, err := conn.Exec(ctx, "ANALYZE "+cfg.Schema+".events"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, sql, index string
		args             []any
	}{
		{"one category", byCat, "events_category", []any{int64(0), int64(0), 50, []string{"rare"}, nil, nil, int64(1) << 62, inc}},
		{"two categories and a type", byCat, "events_category", []any{int64(0), int64(0), 50, []string{"rare", "none"}, []string{"Common"}, nil, int64(1) << 62, inc}},
		{"one type", byType, "events_type", []any{int64(0), int64(0), 50, []string{"Rare"}, nil, nil, int64(1) << 62, inc}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := explain(t, tc.sql, tc.args...)
			if !strings.Contains(plan, "Index Scan using "+tc.index) || strings.Contains(plan, "Seq Scan on events") {
				t.Fatalf("no range scan of %s", tc.index)
			}
			if !strings.Contains(plan, "ROW(") || !strings.Contains(plan, "tx, seq) > ROW(") || strings.Contains(plan, "Rows Removed by Filter") {
				t.Fatalf("the index scan does not start after the position")
			}
		})
	}
}

// BenchmarkFilterIndexCost measures what the indexes of filtered reads
// (events_category, events_type) cost an append: single-event appends alternate between a
// schema with them and one whose indexes were dropped.
func BenchmarkFilterIndexCost(b *testing.B) {
	ctx := context.Background()
	with := newBenchEnv(b, 4)
	cfg := config(b, testSchema+"_bench_noidx")
	cfg.MaxConns = 4
	be := open(b, cfg)
	without, err := varve.New(be, varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	conn := testConn(b, cfg.ConnString)
	if _, err := conn.Exec(ctx, "DROP INDEX IF EXISTS "+be.Schema()+".events_category, "+be.Schema()+".events_type"); err != nil {
		b.Fatal(err)
	}
	evs := benchEvents(1)
	var p pair
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		stream := fmt.Sprintf("order-%d", i%1000)
		freshIDs(evs)
		p.timeBase(func() {
			if _, err := without.Append(ctx, stream, varve.Any, evs...); err != nil {
				b.Fatal(err)
			}
		})
		freshIDs(evs)
		p.timeVarve(func() {
			if _, err := with.s.Append(ctx, stream, varve.Any, evs...); err != nil {
				b.Fatal(err)
			}
		})
	}
	p.report(b, 1, 1)
}

// TestFilteredReadWithoutEventCommits: transactions that write no events
// (checkpoint saves) commit all the time while writers append and a
// reader follows a category in pages of 3. The reader must see every
// event: a filtered page and its through come from one evaluation of the
// horizon. With the horizon evaluated in two statements, a transaction
// without events that ended between the second statement's snapshot and
// its look at the lock table lowered the second horizon, and the reader
// passed over events below the first (found by the projection tests).
func TestFilteredReadWithoutEventCommits(t *testing.T) {
	ctx := context.Background()
	b := open(t, config(t, testSchema))
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cat := "fx" + randomSuffix()
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 150
	var wg sync.WaitGroup
	done := make(chan struct{})
	var saves sync.WaitGroup
	var conn [4]*pgx.Conn
	for c := range conn {
		conn[c] = testConn(t, config(t, testSchema).ConnString)
	}
	for c := range 4 {
		saves.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				// A transaction that has an id and writes no event, open
				// for a moment, as a read model's transaction is.
				tx, err := conn[c].Begin(ctx)
				if err == nil {
					_, err = tx.Exec(ctx, "INSERT INTO "+b.Schema()+".checkpoints (name, commit_pos, seq_pos) VALUES ($1, 0, $2) ON CONFLICT (name) DO UPDATE SET seq_pos = EXCLUDED.seq_pos", fmt.Sprintf("%s-cp-%d", cat, c), i)
				}
				if err == nil {
					_, err = tx.Exec(ctx, "SELECT pg_sleep(0.001)")
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	want := map[string]bool{}
	var mu sync.Mutex
	var last varve.Position
	for w := range writers {
		wg.Go(func() {
			for range each {
				e := varve.NewEvent("E", nil)
				res, err := s.Append(ctx, fmt.Sprintf("%s-%d", cat, w), varve.Any, e)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[e.ID.String()] = true
				if last.Less(res.Position) {
					last = res.Position
				}
				mu.Unlock()
			}
		})
	}
	seen := map[string]bool{}
	pos := start
	writing := make(chan struct{})
	go func() { wg.Wait(); close(writing) }()
	finished := false
	deadline := time.Now().Add(2 * time.Minute) // a bound on a hang
	for !finished || pos.Less(last) {
		select {
		case <-writing:
			finished = true
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("reader at %s, last append at %s", pos, last)
		}
		page, err := s.ReadAllPage(ctx, pos, nil, varve.Limit(3), varve.Filter{Categories: []string{cat}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			seen[e.ID.String()] = true
		}
		pos = page.Through
		if finished {
			mu.Lock()
			l := last
			mu.Unlock()
			if !pos.Less(l) {
				break
			}
		}
	}
	close(done)
	saves.Wait()
	missing := 0
	for id := range want {
		if !seen[id] {
			missing++
		}
	}
	if missing > 0 || len(want) != writers*each {
		t.Fatalf("%d of %d events passed over", missing, len(want))
	}
}

// BenchmarkFilteredPages reads pages of 4 events of a log of 20,000 that
// its filters all match, from a new table that nothing has analyzed yet
// (autovacuum off), as a reader that follows a busy category does: an
// operation reads 25 pages from a random position with each filter in
// turn, unfiltered first. prefix-us, category-us, category-type-us and
// category-prefix-us are a page's time with a stream prefix (the scan of
// $all), a category, a category with a type and a prefix that implies a
// category (the category's index); each /unfiltered ratio is that time
// over the unfiltered page's.
func BenchmarkFilteredPages(b *testing.B) {
	ctx := context.Background()
	cfg := config(b, testSchema+"_bench_pages")
	be := open(b, cfg)
	s, err := varve.New(be, varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	conn := testConn(b, cfg.ConnString)
	if _, err := conn.Exec(ctx, "ALTER TABLE "+be.Schema()+".events SET (autovacuum_enabled = false)"); err != nil {
		b.Fatal(err)
	}
	var positions []varve.Position
	for i := range 1000 {
		evs := benchEvents(20)
		res, err := s.Append(ctx, fmt.Sprintf("dense-%d", i%50), varve.Any, evs...)
		if err != nil {
			b.Fatal(err)
		}
		positions = append(positions, res.Position)
	}
	filters := []struct {
		name string
		f    varve.Filter
	}{
		{"unfiltered", varve.Filter{}},
		{"prefix", varve.Filter{StreamPrefixes: []string{"dens"}}},
		{"category", varve.Filter{Categories: []string{"dense"}}},
		{"category-type", varve.Filter{Categories: []string{"dense"}, Types: []string{benchEvents(1)[0].Type}}},
		{"category-prefix", varve.Filter{StreamPrefixes: []string{"dense-"}}}, // the category, each stream checked
	}
	spent := make([]time.Duration, len(filters))
	buf := make([]varve.RecordedEvent, 0, 4)
	pages := 0
	for b.Loop() {
		from := positions[rand.IntN(len(positions)/2)]
		for i, f := range filters {
			start := time.Now()
			pos := from
			for range 25 {
				page, err := s.ReadAllPage(ctx, pos, buf[:0], varve.Limit(4), f.f)
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Events) != 4 {
					b.Fatalf("%s: a page of %d events", f.name, len(page.Events))
				}
				pos = page.Through
			}
			spent[i] += time.Since(start)
		}
		pages += 25
	}
	for i, f := range filters {
		us := float64(spent[i].Microseconds()) / float64(pages)
		b.ReportMetric(us, f.name+"-us")
		if i > 0 {
			b.ReportMetric(float64(spent[i])/float64(spent[0]), f.name+"/unfiltered")
		}
	}
}
