package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// TestFilterPlans shows that a filtered page is a range scan of the
// category or type index that starts after the page's position, not a
// filter over a scan of $all: on a log of 20,000 events where the filter
// matches 1%, the plan names the index, bounds it by (tx, seq), and reads
// no more rows than the page holds.
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
	if _, err := conn.Exec(ctx, "ANALYZE "+cfg.Schema+".events"); err != nil {
		t.Fatal(err)
	}
	byCat, byType, _ := postgres.FilterQueries(b)
	cases := []struct {
		name, sql, index string
		args             []any
	}{
		{"one category", byCat, "events_category", []any{int64(0), int64(0), 50, []string{"rare"}, nil, nil}},
		{"two categories and a type", byCat, "events_category", []any{int64(0), int64(0), 50, []string{"rare", "none"}, []string{"Common"}, nil}},
		{"one type", byType, "events_type", []any{int64(0), int64(0), 50, []string{"Rare"}, nil, nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+tc.sql, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for rows.Next() {
				var l string
				if err := rows.Scan(&l); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, l)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(lines, "\n")
			t.Logf("plan:\n%s", plan)
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
// (migration 6) cost an append: single-event appends alternate between a
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
