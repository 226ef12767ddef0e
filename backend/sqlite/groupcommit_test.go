package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

// TestGroupCommitIsolation queues writes that succeed and writes that fail
// on their own into one group commit: each caller gets its own outcome.
func TestGroupCommitIsolation(t *testing.T) {
	ctx := context.Background()
	b := open(t, sqlite.Config{Path: tempDB(t), MaxBatchDelay: 300 * time.Millisecond})
	seed := []varve.Event{{ID: varve.NewEventID(), Type: "Seed"}, {ID: varve.NewEventID(), Type: "Seed"}}
	orig, err := b.Append(ctx, varve.AppendRequest{Stream: "seeded", Expected: varve.NoStream, Events: seed})
	if err != nil {
		t.Fatal(err)
	}
	one := func(typ string) []varve.Event { return []varve.Event{{ID: varve.NewEventID(), Type: typ}} }
	poisoned := append(one("New"), varve.Event{ID: seed[1].ID, Type: "Dup"})
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		req  varve.AppendRequest
		want error // nil: success
	}{
		{"new stream", ctx, varve.AppendRequest{Stream: "fresh-1", Expected: varve.NoStream, Events: one("A")}, nil},
		{"stale expectation", ctx, varve.AppendRequest{Stream: "seeded", Expected: varve.Exact(1), Events: one("B")}, varve.ErrWrongExpectedVersion},
		{"known id mid-batch", ctx, varve.AppendRequest{Stream: "seeded", Expected: varve.Any, Events: poisoned}, varve.ErrDuplicateEvent},
		{"exact retry", ctx, varve.AppendRequest{Stream: "seeded", Expected: varve.NoStream, Events: seed}, nil},
		{"cancelled", cancelled, varve.AppendRequest{Stream: "fresh-2", Expected: varve.Any, Events: one("C")}, context.Canceled},
		{"another new stream", ctx, varve.AppendRequest{Stream: "fresh-3", Expected: varve.Any, Events: append(one("D"), one("E")...)}, nil},
	}
	before := b.Stats()
	results := make([]varve.AppendResult, len(cases))
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i, tc := range cases {
		wg.Go(func() { results[i], errs[i] = b.Append(tc.ctx, tc.req) })
	}
	wg.Wait()
	after := b.Stats()
	for i, tc := range cases {
		if tc.want == nil && errs[i] != nil || tc.want != nil && !errors.Is(errs[i], tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, errs[i], tc.want)
		}
	}
	if results[3] != orig {
		t.Errorf("exact retry returned %+v, want %+v", results[3], orig)
	}
	// The cancelled append never reaches the writer; the rest share a commit.
	if c := after.Commits - before.Commits; c != 1 {
		t.Logf("the writes took %d commits instead of 1 (a slow scheduler); isolation was still checked", c)
	}
	want := map[string]int{"seeded": 2, "fresh-1": 1, "fresh-3": 2}
	for stream, n := range want {
		evs, err := b.ReadStream(ctx, varve.StreamQuery{Stream: stream, Limit: 10}, nil)
		if err != nil || len(evs) != n {
			t.Errorf("stream %s: %d events, want %d (%v)", stream, len(evs), n, err)
		}
	}
	if _, err := b.StreamInfo(ctx, "fresh-2"); !errors.Is(err, varve.ErrStreamNotFound) {
		t.Errorf("the cancelled append created its stream: %v", err)
	}
}

// TestGroupCommitBatches checks that concurrent appends share commits.
func TestGroupCommitBatches(t *testing.T) {
	ctx := context.Background()
	b := open(t, sqlite.Config{Path: tempDB(t)})
	const writers, appends = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				_, err := b.Append(ctx, varve.AppendRequest{Stream: fmt.Sprintf("w-%d", w), Expected: varve.Exact(varve.Version(i)),
					Events: []varve.Event{{ID: varve.NewEventID(), Type: "E"}}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := b.Stats()
	if st.Writes != writers*appends || st.Commits >= st.Writes {
		t.Fatalf("%d writes in %d commits: no group commit", st.Writes, st.Commits)
	}
	t.Logf("%d appends in %d commits (%.1f per commit)", st.Writes, st.Commits, float64(st.Writes)/float64(st.Commits))
}
