package pgcdc_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/cdc/pgcdc"
)

func newStore(t *testing.T) *varve.Store {
	t.Helper()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func readStream(t *testing.T, store *varve.Store, stream string) []varve.RecordedEvent {
	t.Helper()
	var out []varve.RecordedEvent
	for e, err := range store.ReadStream(context.Background(), stream) {
		if err != nil {
			t.Fatalf("read %s: %v", stream, err)
		}
		out = append(out, e)
	}
	return out
}

func TestAppendToStore(t *testing.T) {
	f := newFixture(t, "CREATE TABLE orders (id int PRIMARY KEY, item text, note text)",
		"ALTER TABLE orders ALTER note SET STORAGE EXTERNAL",
		"CREATE TABLE lines (order_id int, n int, qty int, PRIMARY KEY (order_id, n))")
	cfg := f.config("orders", "lines")
	s := f.start(cfg)
	s.Close() // the slot exists from here on: the changes below are kept
	f.exec("BEGIN")
	f.exec("INSERT INTO orders VALUES (1, 'tea', repeat('x', 5000)), (2, 'cake', NULL)")
	f.exec("INSERT INTO lines VALUES (1, 1, 3)")
	f.exec("UPDATE orders SET item = 'green tea' WHERE id = 1")
	f.exec("COMMIT")
	f.exec("DELETE FROM orders WHERE id = 2")
	f.exec("TRUNCATE lines")

	for _, layout := range []struct {
		name    string
		layout  pgcdc.Layout
		streams map[string][]string // stream -> event types
		order1  string
	}{
		{"per row", pgcdc.PerRow, map[string][]string{
			f.name + ".orders-1": {"insert", "update"}, f.name + ".orders-2": {"insert", "delete"},
			f.name + ".lines-1,1": {"insert"}, f.name + ".lines": {"truncate"}}, f.name + ".orders-1"},
		{"per table", pgcdc.PerTable, map[string][]string{
			f.name + ".orders": {"insert", "insert", "update", "delete"}, f.name + ".lines": {"insert", "truncate"}}, f.name + ".orders"},
	} {
		t.Run(layout.name, func(t *testing.T) {
			// Nothing is acknowledged: every stream on the slot starts over.
			s := f.start(cfg)
			defer s.Close()
			store := newStore(t)
			scfg := pgcdc.StoreConfig{Layout: layout.layout, Namespace: f.name}
			var txs []*pgcdc.Transaction
			for range 3 {
				txs = append(txs, next(t, s))
			}
			for _, tx := range txs {
				// Twice: the second append is a retry and writes nothing.
				for range 2 {
					if err := pgcdc.AppendToStore(context.Background(), store, tx, scfg); err != nil {
						t.Fatal(err)
					}
				}
			}
			for stream, types := range layout.streams {
				events := readStream(t, store, stream)
				if len(events) != len(types) {
					t.Fatalf("%s: %d events, want %d", stream, len(events), len(types))
				}
				for i, e := range events {
					if e.Type != types[i] {
						t.Errorf("%s[%d]: type %s, want %s", stream, i, e.Type, types[i])
					}
				}
			}
			// The update of orders-1 left the TOAST-ed note out: it says so.
			var upd pgcdc.ChangeEvent
			events := readStream(t, store, layout.order1)
			for _, e := range events {
				if e.Type == "update" {
					if err := json.Unmarshal(e.Data, &upd); err != nil {
						t.Fatal(err)
					}
				}
			}
			if upd.New["item"] != "green tea" || len(upd.Unchanged) != 1 || upd.Unchanged[0] != "note" || upd.Key["id"] != 1.0 {
				t.Errorf("update event: %+v", upd)
			}
			if _, has := upd.New["note"]; has {
				t.Errorf("an unchanged TOAST-ed value is in the event as %v", upd.New["note"])
			}
			if upd.CommitLSN != txs[0].CommitLSN.String() || upd.Xid != txs[0].Xid {
				t.Errorf("update event envelope: %+v, tx %d at %s", upd, txs[0].Xid, txs[0].CommitLSN)
			}
			if id := events[0].ID; id != pgcdc.EventID(f.name, txs[0].CommitLSN, 0) {
				t.Errorf("first event id %s, want the one derived from commit LSN and index", id)
			}
		})
	}
}
