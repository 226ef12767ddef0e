package sqlite

import (
	"context"
	"database/sql/driver"
	"strings"
	"testing"
)

// TestQueryPlans keeps the hot statements on their indexes: no full scan of
// events and no sort in a temporary b-tree.
func TestQueryPlans(t *testing.T) {
	b, err := New(context.Background(), Config{Path: Memory})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cases := []struct {
		name  string
		query string
		args  []driver.Value
	}{
		{"read forward", qReadForward, []driver.Value{int64(1), "s", int64(10)}},
		{"read backward", qReadBackward, []driver.Value{int64(1), "s", int64(10)}},
		{"read all", qReadAll, []driver.Value{int64(0), int64(10)}},
		{"read all backward", qReadAllBackward, []driver.Value{int64(100), int64(10)}},
		{"last position", qLastPosition, nil},
		{"next position", qNextPosition, nil},
		{"stream row", qStreamRow, []driver.Value{"s"}},
		{"event version", qEventVersion, []driver.Value{int64(1), []byte("x")}},
		{"event ids", qEventIDs, []driver.Value{int64(1), int64(1), int64(3)}},
		{"truncate", qTruncate, []driver.Value{int64(1), int64(3)}},
		{"delete events", qDeleteEvents, []driver.Value{int64(1)}},
		{"filtered by a category", filterShape{"category", 1}.sql(), []driver.Value{int64(0), int64(10), nil, nil, "c"}},
		{"filtered by categories, types and prefixes", filterShape{"category", 3}.sql(),
			[]driver.Value{int64(0), int64(10), `["T"]`, `["c-1"]`, "a", "b", "c"}},
		{"filtered by types", filterShape{"type", 2}.sql(), []driver.Value{int64(0), int64(10), nil, nil, "T", "U"}},
		{"query by a tag and a type", queryStatement("ty"), []driver.Value{int64(0), int64(10), "tag", "T"}},
	}
	c := b.wconn
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var plan []string
			err := c.query(context.Background(), "EXPLAIN QUERY PLAN "+tc.query, func(v []driver.Value) error {
				plan = append(plan, asString(v[3]))
				return nil
			}, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, " | ")
			t.Log(text)
			if strings.Contains(text, "TEMP B-TREE") || strings.Contains(text, "SCAN e") || strings.Contains(text, "SCAN events") {
				t.Fatalf("plan of %s: %s", tc.name, text)
			}
		})
	}
}
