package subscription_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/subscription"
)

func TestStreamSubscription(t *testing.T) {
	t.Parallel()
	eachBackend(t, testStreamSubscription)
}

// testStreamSubscription follows one stream through its own reads: from
// the start, from a position in its middle, across a truncation, a
// deletion and the stream's new life, and live.
func testStreamSubscription(t *testing.T, open opener) {
	ctx := context.Background()
	s := open(t, varve.Config{PageSize: 4})
	var positions []varve.Position
	for range 10 {
		positions = append(positions, appendN(t, s, "acct-1", "Deposited", 1))
		appendN(t, s, "acct-2", "Deposited", 1)
	}
	sub, err := subscription.Open(ctx, s, subscription.Config{Name: "acct", Stream: "acct-1", PageSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"acct-1@1", "acct-1@2", "acct-1@3", "acct-1@4", "acct-1@5", "acct-1@6", "acct-1@7", "acct-1@8", "acct-1@9", "acct-1@10"}
	if got := ids(drain(t, sub, positions[9])); !slices.Equal(got, want) {
		t.Fatalf("from the start: got %v, want %v", got, want)
	}

	// From a checkpoint in the middle: more events at or before it than a
	// page holds are passed over.
	mid, err := subscription.Open(ctx, s, subscription.Config{Name: "acct-mid", Stream: "acct-1", PageSize: 2,
		Start: subscription.FromPosition, Position: positions[6]})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(drain(t, mid, positions[9])); !slices.Equal(got, want[7:]) {
		t.Fatalf("from version 7: got %v, want %v", got, want[7:])
	}

	if err := s.Truncate(ctx, "acct-1", 9); err != nil {
		t.Fatal(err)
	}
	end := appendN(t, s, "acct-1", "Deposited", 2)
	if got := ids(drain(t, sub, end)); !slices.Equal(got, []string{"acct-1@11", "acct-1@12"}) {
		t.Fatalf("after a truncation: got %v", got)
	}

	// Deleted and written again, longer than it was read: the new life is
	// read from its first event.
	if err := s.Delete(ctx, "acct-1", varve.Any); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "acct-2", "Deposited", 1)
	end = appendN(t, s, "acct-1", "Opened", 13)
	got := ids(drain(t, sub, end))
	if len(got) != 13 || got[0] != "acct-1@1" || got[12] != "acct-1@13" {
		t.Fatalf("after deletion: got %v", got)
	}

	// Caught up, then live.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = sub.Next(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caught up: Next gives %v, want the deadline", err)
	}
	appendN(t, s, "acct-2", "Deposited", 1)
	end = appendN(t, s, "acct-1", "Closed", 1)
	if got := ids(drain(t, sub, end)); !slices.Equal(got, []string{"acct-1@14"}) {
		t.Fatalf("live: got %v", got)
	}
}

// counting counts the reads of the global log of a memory backend.
type counting struct {
	*memory.Backend
	all, filtered int
}

func (c *counting) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	c.all++
	return c.Backend.ReadAll(ctx, q, buf)
}

func (c *counting) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	c.filtered++
	return c.Backend.ReadAllFiltered(ctx, q, buf)
}

// TestSubscriptionsReadWhatTheyNeed: a subscription to a stream reads no
// page of the global log, and one to a category reads filtered pages.
func TestSubscriptionsReadWhatTheyNeed(t *testing.T) {
	ctx := context.Background()
	b := &counting{Backend: memory.New()}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 50 {
		appendN(t, s, "noise-1", "N", 1)
	}
	end := appendN(t, s, "order-1", "Placed", 1)
	for _, tc := range []struct {
		cfg                 subscription.Config
		wantAll, wantFilter bool
	}{
		{subscription.Config{Name: "stream", Stream: "order-1"}, false, false},
		{subscription.Config{Name: "category", Filter: varve.Filter{Categories: []string{"order"}}}, false, true},
		{subscription.Config{Name: "all"}, true, false},
	} {
		b.all, b.filtered = 0, 0
		sub, err := subscription.Open(ctx, s, tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, sub, end)
		if tc.cfg.Name != "all" && !slices.Equal(ids(got), []string{"order-1@1"}) {
			t.Fatalf("%s: got %v", tc.cfg.Name, ids(got))
		}
		if (b.all > 0) != tc.wantAll || (b.filtered > 0) != tc.wantFilter {
			t.Fatalf("%s: %d reads of $all, %d filtered reads", tc.cfg.Name, b.all, b.filtered)
		}
	}
}
