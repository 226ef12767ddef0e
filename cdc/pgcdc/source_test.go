package pgcdc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/cdc/pgcdc"
	"github.com/varve-go/varve/delivery"
)

// keyed is what a handler sink saw of one delivery.
type keyed struct {
	key   string
	pos   varve.Position
	op    string
	value any // column v of the row after the change, or the key of a delete
}

func TestNewSourceErrors(t *testing.T) {
	if _, err := pgcdc.NewSource(nil, pgcdc.SourceConfig{}); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Errorf("nil stream: %v, want ErrInvalidArgument", err)
	}
}

// TestSourceIntoDispatcher: the changes of several transactions on two
// tables go straight from the slot to a dispatcher and a handler sink, in
// order per row; while one change of the second transaction is held by the
// sink, the slot's confirmed flush LSN stays before that transaction though
// later ones are delivered, and it moves past all of them once the change is
// delivered.
func TestSourceIntoDispatcher(t *testing.T) {
	f := newFixture(t, "CREATE TABLE a (id int PRIMARY KEY, v int)", "CREATE TABLE b (id int PRIMARY KEY, v int)")
	cfg := f.config("a", "b")
	s := f.start(cfg)
	src, err := pgcdc.NewSource(s, pgcdc.SourceConfig{Namespace: f.name})
	if err != nil {
		t.Fatal(err)
	}
	if src.Name() != f.name {
		t.Errorf("name %q, want the slot's %q", src.Name(), f.name)
	}
	parkedStore, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer parkedStore.Close()

	release := make(chan struct{})
	var mu sync.Mutex
	var got []keyed
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		var ev pgcdc.ChangeEvent
		if err := json.Unmarshal(d.Event.Data, &ev); err != nil {
			return delivery.Permanent(err)
		}
		if d.Event.Type != ev.Op || d.Event.ID != pgcdc.EventID(f.name, mustLSN(t, ev.CommitLSN), int(d.Event.Position.Seq-1)) {
			return delivery.Permanent(fmt.Errorf("event %+v does not match its change %+v", d.Event, ev))
		}
		k := keyed{key: d.Event.Stream, pos: d.Event.Position, op: ev.Op, value: ev.New["v"]}
		if ev.Op == "delete" {
			k.value = ev.Key["id"]
		}
		if k.value == float64(99) { // the held change
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		mu.Lock()
		got = append(got, k)
		mu.Unlock()
		return nil
	})
	d, err := delivery.NewFromSource(src, sink, delivery.Config{Concurrency: 4, CheckpointInterval: 10 * time.Millisecond,
		Parked: delivery.NewParked(parkedStore, src.Name()), Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	f.exec("BEGIN; INSERT INTO a VALUES (1, 1), (2, 1); INSERT INTO b VALUES (1, 1); COMMIT")                                   // tx1
	f.exec("BEGIN; UPDATE a SET v = 2 WHERE id = 1; UPDATE a SET v = 99 WHERE id = 2; UPDATE b SET v = 2 WHERE id = 1; COMMIT") // tx2
	f.exec("BEGIN; UPDATE a SET v = 3 WHERE id = 1; DELETE FROM b WHERE id = 1; INSERT INTO b VALUES (2, 1); COMMIT")           // tx3

	// Every change but the held one is delivered.
	waitCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for d.Stats().Delivered < 8 {
		select {
		case <-waitCtx.Done():
			t.Fatalf("delivered %d of 8 changes before the held one", d.Stats().Delivered)
		case <-time.After(5 * time.Millisecond):
		}
	}
	mu.Lock()
	commits := map[int]uint64{} // transaction (1-based) -> commit LSN
	for _, k := range got {
		if k.key == f.name+".a-1" {
			commits[int(k.value.(float64))] = k.pos.Commit
		}
	}
	mu.Unlock()
	if len(commits) != 3 {
		t.Fatalf("row a-1 got %d transactions, want 3", len(commits))
	}
	// The checkpoint stops at tx1: its confirmed flush LSN is past tx1's
	// commit and before tx2's, however long we wait for status updates.
	tx1End := waitConfirmed(t, f, func(l pgcdc.LSN) bool { return uint64(l) > commits[1] })
	if uint64(tx1End) >= commits[2] {
		t.Fatalf("confirmed flush LSN %s moved past the commit of tx2 (%d) while a change of it was in flight", tx1End, commits[2])
	}
	// The first change of tx2 is delivered: the dispatcher's checkpoint is
	// inside tx2, which the source does not acknowledge.
	if cp := d.Stats().Checkpoint; cp.Commit != commits[2] || cp.Seq != 1 {
		t.Errorf("dispatcher checkpoint %v, want the first change of tx2 %d/1", cp, commits[2])
	}
	time.Sleep(10 * cfg.StatusInterval) // several status updates
	if info := inspect(t, f); info.ConfirmedFlushLSN != tx1End {
		t.Fatalf("confirmed flush LSN moved to %s while tx2 was in flight, want it to stay at %s", info.ConfirmedFlushLSN, tx1End)
	}

	close(release)
	last := varve.Position{Commit: commits[3], Seq: 3}
	if err := d.WaitFor(waitCtx, last); err != nil {
		t.Fatal(err)
	}
	waitConfirmed(t, f, func(l pgcdc.LSN) bool { return uint64(l) > commits[3] })

	want := map[string][]keyed{
		f.name + ".a-1": {{op: "insert", value: 1.0}, {op: "update", value: 2.0}, {op: "update", value: 3.0}},
		f.name + ".a-2": {{op: "insert", value: 1.0}, {op: "update", value: 99.0}},
		f.name + ".b-1": {{op: "insert", value: 1.0}, {op: "update", value: 2.0}, {op: "delete", value: 1.0}},
		f.name + ".b-2": {{op: "insert", value: 1.0}},
	}
	mu.Lock()
	defer mu.Unlock()
	perKey := map[string][]keyed{}
	for _, k := range got {
		perKey[k.key] = append(perKey[k.key], k)
	}
	for key, w := range want {
		g := perKey[key]
		if len(g) != len(w) {
			t.Errorf("%s: %d deliveries %v, want %d", key, len(g), g, len(w))
			continue
		}
		for i := range w {
			if g[i].op != w[i].op || g[i].value != w[i].value || i > 0 && !g[i-1].pos.Less(g[i].pos) {
				t.Errorf("%s delivery %d: %+v, want %s %v in position order", key, i, g[i], w[i].op, w[i].value)
			}
		}
	}
	if len(perKey) != len(want) {
		t.Errorf("keys %v, want %d", perKey, len(want))
	}
}

func mustLSN(t *testing.T, s string) pgcdc.LSN {
	t.Helper()
	l, err := pgcdc.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func inspect(t *testing.T, f *fixture) pgcdc.SlotInfo {
	t.Helper()
	info, err := pgcdc.Inspect(context.Background(), f.conn, f.name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// waitConfirmed waits (up to a minute) until the slot's confirmed flush LSN
// satisfies ok, and returns it.
func waitConfirmed(t *testing.T, f *fixture, ok func(pgcdc.LSN) bool) pgcdc.LSN {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		info := inspect(t, f)
		if ok(info.ConfirmedFlushLSN) {
			return info.ConfirmedFlushLSN
		}
		if time.Now().After(deadline) {
			t.Fatalf("confirmed flush LSN still %s after a minute", info.ConfirmedFlushLSN)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
