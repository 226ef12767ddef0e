package projection_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
)

// TestQueryProjection: a projection of a consistency boundary sees the
// events of its query only, and says when a filter is given too; on every
// backend that keeps tags.
func TestQueryProjection(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		s := k.Open(t, varve.Config{})
		if !s.Capabilities().Tags {
			t.Skip("the store keeps no tags")
		}
		ctx := t.Context()
		q := varve.Query{Items: []varve.QueryItem{{Tags: []string{"course:7"}}}}
		var mu sync.Mutex
		seen := map[string]int{}
		p := projection.Projection{Name: "course7", Version: 1, Query: q, Handle: func(_ context.Context, b projection.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range b.Events {
				seen[e.Stream]++
			}
			return nil
		}}
		bad := p
		bad.Filter = varve.Filter{Types: []string{"X"}}
		if _, err := projection.NewRunner(s, bad, projection.Config{}); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Fatalf("a projection with a filter and a query: %v, want ErrInvalidArgument", err)
		}
		var last varve.Position
		for i, tag := range []string{"course:7", "course:8", "course:7"} {
			e := varve.NewEvent("Enrolled", []byte(`{}`))
			e.Tags = []string{tag}
			res, err := s.Append(ctx, []string{"a", "b", "c"}[i], varve.Any, e)
			if err != nil {
				t.Fatal(err)
			}
			last = res.Position
		}
		r, err := projection.NewRunner(s, p, projection.Config{MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		if err := r.WaitFor(ctx, last); err != nil {
			t.Fatal(err)
		}
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if seen["a"] != 1 || seen["c"] != 1 || seen["b"] != 0 {
			t.Fatalf("the projection of the query saw %v, want a and c once", seen)
		}
	})
}
