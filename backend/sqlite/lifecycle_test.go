package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

func appendN(t *testing.T, b *sqlite.Backend, stream string, exp varve.ExpectedVersion, n int) varve.AppendResult {
	t.Helper()
	evs := make([]varve.Event, n)
	for i := range evs {
		evs[i] = varve.Event{ID: varve.NewEventID(), Type: "E"}
	}
	res, err := b.Append(context.Background(), varve.AppendRequest{Stream: stream, Expected: exp, Events: evs})
	if err != nil {
		t.Fatalf("append %d to %s at %s: %v", n, stream, exp, err)
	}
	return res
}

// TestPositionsNeverReused removes the events at the end of the log, by
// each means, and checks that later appends, also after a reopen, get
// positions after them.
func TestPositionsNeverReused(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		remove func(b *sqlite.Backend, stream string) error
	}{
		{"delete", func(b *sqlite.Backend, s string) error { return b.Delete(ctx, s, varve.Any, false) }},
		{"tombstone", func(b *sqlite.Backend, s string) error { return b.Delete(ctx, s, varve.Any, true) }},
		{"truncate", func(b *sqlite.Backend, s string) error { return b.Truncate(ctx, s, 100) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tempDB(t)
			b := open(t, sqlite.Config{Path: path})
			appendN(t, b, "keep", varve.NoStream, 3)
			tail := appendN(t, b, "tail", varve.NoStream, 5)
			if err := tc.remove(b, "tail"); err != nil {
				t.Fatal(err)
			}
			if lp, err := b.LastPosition(ctx); err != nil || !lp.Less(tail.Position) {
				t.Fatalf("last position %s after removing the tail at %s: %v", lp, tail.Position, err)
			}
			next := appendN(t, b, "keep", varve.Any, 1)
			if !tail.Position.Less(next.Position) {
				t.Fatalf("append after removal at %s, the removed tail ended at %s", next.Position, tail.Position)
			}
			if err := tc.remove(b, "keep"); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = open(t, sqlite.Config{Path: path})
			again := appendN(t, b, "other", varve.NoStream, 1)
			if !next.Position.Less(again.Position) {
				t.Fatalf("append after reopen at %s, the log had reached %s", again.Position, next.Position)
			}
		})
	}
}

func TestStreamInfoAfterRemoval(t *testing.T) {
	ctx := context.Background()
	b := open(t, sqlite.Config{Path: sqlite.Memory})
	res := appendN(t, b, "s", varve.NoStream, 10)
	if err := b.Truncate(ctx, "s", 100); err != nil {
		t.Fatal(err)
	}
	info, err := b.StreamInfo(ctx, "s")
	if err != nil || info.Version != 10 || info.LastPosition != res.Position || info.Deleted {
		t.Fatalf("info after truncating every event: %+v %v", info, err)
	}
	if r := appendN(t, b, "s", varve.Exact(10), 1); r.FirstVersion != 11 {
		t.Fatalf("append after truncating every event: %+v", r)
	}
	if err := b.Delete(ctx, "s", varve.Exact(11), false); err != nil {
		t.Fatal(err)
	}
	wantErr := func(what string, err, target error) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("%s: %v, want %v", what, err, target)
		}
	}
	wantErr("truncate of a deleted stream", b.Truncate(ctx, "s", 1), varve.ErrStreamNotFound)
	wantErr("delete of a deleted stream", b.Delete(ctx, "s", varve.Any, false), varve.ErrStreamNotFound)
	created := time.Now()
	appendN(t, b, "s", varve.NoStream, 2)
	info, err = b.StreamInfo(ctx, "s")
	if err != nil || info.Version != 2 || info.Deleted || info.CreatedAt.Before(created.Add(-time.Second)) {
		t.Fatalf("info of a stream written again after a delete: %+v %v", info, err)
	}
}

func TestDeleteDropsSnapshot(t *testing.T) {
	ctx := context.Background()
	b := open(t, sqlite.Config{Path: sqlite.Memory})
	appendN(t, b, "agg", varve.NoStream, 3)
	if err := b.SaveSnapshot(ctx, varve.Snapshot{Stream: "agg", Version: 3, Data: []byte("state")}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.LoadSnapshot(ctx, "agg"); !ok || err != nil {
		t.Fatalf("load: %v %v", ok, err)
	}
	if err := b.Delete(ctx, "agg", varve.Exact(3), false); err != nil {
		t.Fatal(err)
	}
	// A snapshot of the old stream must not be applied to its new events.
	if s, ok, err := b.LoadSnapshot(ctx, "agg"); ok || err != nil {
		t.Fatalf("snapshot of a deleted stream: %+v %v %v", s, ok, err)
	}
}

func TestCloseWithWritesInFlight(t *testing.T) {
	b, err := sqlite.New(context.Background(), sqlite.Config{Path: tempDB(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			_, err := b.Append(ctx, varve.AppendRequest{Stream: "s", Expected: varve.Any, Events: []varve.Event{{ID: varve.NewEventID(), Type: "E"}}})
			errs <- err
		}()
	}
	time.Sleep(time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for range 16 {
		if err := <-errs; err != nil && !errors.Is(err, varve.ErrClosed) {
			t.Fatalf("append racing Close: %v", err)
		}
	}
	select {
	case <-b.Watch():
	default:
		t.Fatal("Watch on a closed backend blocks")
	}
}
