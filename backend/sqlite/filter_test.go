package sqlite

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/varve-go/varve"
)

// TestFilterUpgrade: the events of a database of schema version 1 get
// their categories when it is opened (migration 2), and filtered reads
// find them through the new indexes.
func TestFilterUpgrade(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	c, err := openConn(path, "mode=rwc")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{ms[0].SQL, "PRAGMA user_version = 1",
		`INSERT INTO streams (id, name, version, last_position, created_at, updated_at) VALUES (1, 'order-1', 2, 0, 0, 0), (2, 'cart-1', 1, 0, 0, 0), (3, 'order', 1, 0, 0, 0)`,
		`INSERT INTO events (position, stream_id, version, event_id, type, recorded_at) VALUES
			(1, 1, 1, x'01', 'Placed', 0), (2, 2, 1, x'02', 'Added', 0), (3, 1, 2, x'03', 'Paid', 0), (4, 3, 1, x'04', 'Noted', 0)`,
	} {
		if _, err := c.exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	b, err := New(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		f    varve.Filter
		want []uint64 // positions
	}{
		{varve.Filter{Categories: []string{"order"}}, []uint64{1, 3, 4}},
		{varve.Filter{Categories: []string{"cart"}}, []uint64{2}},
		{varve.Filter{Types: []string{"Paid", "Added"}}, []uint64{2, 3}},
	} {
		var got []uint64
		for e, err := range s.ReadAll(ctx, varve.Start, tc.f) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e.Position.Seq)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: positions %v, want %v", tc.f, got, tc.want)
		}
	}
}
