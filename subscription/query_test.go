package subscription_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/subscription"
)

// TestQuerySubscription: a subscription to a consistency boundary (a
// query of types and tags) catches up, goes live, resumes from its
// checkpoint and, under racing writers, gets exactly the matching events
// in position order, once each; on every backend that keeps tags.
func TestQuerySubscription(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		s := k.Open(t, varve.Config{})
		ctx := t.Context()
		q := varve.Query{Items: []varve.QueryItem{{Types: []string{"Enrolled"}, Tags: []string{"course:7"}}, {Tags: []string{"student:9"}}}}
		if !s.Capabilities().Tags {
			_, err := subscription.Open(ctx, s, subscription.Config{Name: "boundary", Query: q})
			if !errors.Is(err, varve.ErrNotSupported) {
				t.Fatalf("a query subscription on a store without tags: %v, want ErrNotSupported", err)
			}
			return
		}
		if _, err := subscription.Open(ctx, s, subscription.Config{Name: "both", Query: q, Filter: varve.Filter{Types: []string{"X"}}}); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Fatalf("a query with a filter: %v, want ErrInvalidArgument", err)
		}
		var mu sync.Mutex
		var want []uuid.UUID // the matching events, in append order per writer
		appendOne := func(stream, typ string, tags ...string) {
			t.Helper()
			e := varve.NewEvent(typ, []byte(`{}`))
			e.Tags = tags
			if _, err := s.Append(ctx, stream, varve.Any, e); err != nil {
				t.Error(err)
				return
			}
			if q.Match(&varve.RecordedEvent{Type: typ, Tags: tags}) {
				mu.Lock()
				want = append(want, e.ID)
				mu.Unlock()
			}
		}
		// Before the subscription: caught up on.
		appendOne("course-7", "Enrolled", "course:7", "student:1")
		appendOne("course-7", "Dropped", "course:7", "student:1")
		appendOne("course-8", "Enrolled", "course:8", "student:9")
		appendOne("course-8", "Enrolled", "course:8", "student:2")

		var gotMu sync.Mutex
		var got []varve.RecordedEvent
		run := func() (stop func()) {
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- subscription.Run(rctx, s, subscription.Config{Name: "boundary", Query: q, MaxPoll: 20 * time.Millisecond, PageSize: 3},
					func(_ context.Context, e varve.RecordedEvent) error {
						gotMu.Lock()
						got = append(got, e)
						gotMu.Unlock()
						return nil
					})
			}()
			return func() {
				cancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("run: %v", err)
				}
			}
		}
		waitGot := func(n int) {
			t.Helper()
			deadline := time.Now().Add(time.Minute)
			for {
				gotMu.Lock()
				have := len(got)
				gotMu.Unlock()
				if have >= n {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the subscription got %d events, want %d", have, n)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		stop := run()
		waitGot(2)
		// Live, under racing writers, then a restart from the checkpoint.
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 15 {
					switch i % 3 {
					case 0:
						appendOne(fmt.Sprintf("course-7-%d", w), "Enrolled", "course:7", fmt.Sprintf("student:%d", 100+w))
					case 1:
						appendOne(fmt.Sprintf("student-9-%d", w), "Paid", "student:9")
					default:
						appendOne(fmt.Sprintf("course-3-%d", w), "Enrolled", "course:3")
					}
					if w == 0 && i == 7 {
						stop()
						stop = run()
					}
				}
			})
		}
		wg.Wait()
		mu.Lock()
		n := len(want)
		mu.Unlock()
		waitGot(n)
		stop()
		// Exactly the query's events, in position order, once each, as a
		// read of the query gives them.
		var read []varve.RecordedEvent
		for e, err := range s.ReadQuery(ctx, q, varve.Start) {
			if err != nil {
				t.Fatal(err)
			}
			read = append(read, e)
		}
		if len(got) != len(read) || len(read) != n {
			t.Fatalf("the subscription got %d events, a read of the query %d, %d were appended", len(got), len(read), n)
		}
		for i := range got {
			if got[i].ID != read[i].ID || !q.Match(&got[i]) {
				t.Fatalf("event %d: got %s %v at %s, want %s at %s", i, got[i].Type, got[i].Tags, got[i].Position, read[i].ID, read[i].Position)
			}
		}
		// The lag is counted by the query.
		d, ok, err := subscription.Described(ctx, s, "boundary")
		if err != nil || !ok || len(d.Query.Items) != 2 {
			t.Fatalf("the recorded descriptor: %+v %v %v", d, ok, err)
		}
		appendOne("course-3-x", "Enrolled", "course:3")
		appendOne("course-7-x", "Enrolled", "course:7")
		cp, _, err := s.Checkpoints().Load(ctx, "boundary")
		if err != nil {
			t.Fatal(err)
		}
		if lag, more, err := subscription.Lag(ctx, s, cp, d, 100); err != nil || lag != 1 || more {
			t.Fatalf("the lag after one matching and one other event: %d %v %v, want 1", lag, more, err)
		}
	})
}
