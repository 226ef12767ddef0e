package subscription_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

func TestSegmentOf(t *testing.T) {
	counts := map[int]int{}
	for i := range 8000 {
		s := subscription.SegmentOf(fmt.Sprintf("acct-%d", i), 8)
		if s < 0 || s >= 8 {
			t.Fatalf("segment %d of 8", s)
		}
		if again := subscription.SegmentOf(fmt.Sprintf("acct-%d", i), 8); again != s {
			t.Fatalf("acct-%d: segment %d, then %d", i, s, again)
		}
		counts[s]++
	}
	for s, n := range counts {
		if n < 800 || n > 1200 { // 1000 each; far outside means a broken hash
			t.Errorf("segment %d has %d of 8000 streams", s, n)
		}
	}
	for _, tc := range []struct {
		stream string
		count  int
	}{{"a", 0}, {"a", 1}, {"", 5}} {
		if s := subscription.SegmentOf(tc.stream, tc.count); tc.count <= 1 && s != 0 || s < 0 || tc.count > 1 && s >= tc.count {
			t.Errorf("SegmentOf(%q, %d) = %d", tc.stream, tc.count, s)
		}
	}
}

func TestSegmentedBadInput(t *testing.T) {
	s := newStore(t, true)
	ok := subscription.Config{Name: "seg"}
	for _, tc := range []struct {
		name  string
		cfg   subscription.Config
		count int
		ttl   time.Duration
		want  error
	}{
		{"negative segments", ok, -1, time.Second, varve.ErrInvalidArgument},
		{"too many", ok, subscription.MaxSegments + 1, time.Second, varve.ErrInvalidArgument},
		{"one stream", subscription.Config{Name: "seg", Stream: "acct-1"}, 4, time.Second, varve.ErrInvalidArgument},
		{"short ttl", ok, 4, time.Millisecond, varve.ErrInvalidArgument},
		{"no name", subscription.Config{}, 4, time.Second, varve.ErrInvalidArgument},
		{"own checkpoints", subscription.Config{Name: "seg", Checkpoints: subscription.NewMemoryCheckpoints()}, 4, time.Second, varve.ErrNotSupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Lease = subscription.Lease{Holder: "a", TTL: tc.ttl, Segments: tc.count}
			err := subscription.Run(t.Context(), s, cfg, func(context.Context, varve.RecordedEvent) error { return nil })
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	// A lease's settings without a holder, or past its bounds, are refused.
	for _, l := range []subscription.Lease{{TTL: time.Second}, {Segments: 4}, {Holder: "a", TTL: varve.MaxLeaseTTL + 1}, {Holder: "a", Segments: -1}} {
		cfg := subscription.Config{Name: "seg", Lease: l}
		if err := subscription.Run(t.Context(), s, cfg, nil); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("lease %+v: %v, want ErrInvalidArgument", l, err)
		}
	}
	// Open refuses a segment outside its count.
	for _, cfg := range []subscription.Config{
		{Name: "x", Segment: 4, Segments: 4},
		{Name: "x", Segment: -1, Segments: 4},
		{Name: "x", Segment: 0, Segments: 4, Stream: "acct-1"},
	} {
		if _, err := subscription.Open(t.Context(), s, cfg); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("open %+v: %v", cfg, err)
		}
	}
	_, _, err := subscription.SegmentStatus(t.Context(), s, "seg", 0)
	if !errors.Is(err, varve.ErrInvalidArgument) {
		t.Errorf("status of 0 segments: %v", err)
	}
}

func TestSegmented(t *testing.T) {
	t.Parallel()
	eachBackend(t, testSegmented)
}

// testSegmented runs one subscription of 8 segments in 3 holders that join
// one after another, then stops one: the segments spread over the holders
// (3, 3, 2 then 4, 4), every event is handled exactly once (hand-overs
// save the checkpoint before the lease is released), each stream by one
// holder at a time in version order, and the status names who holds what.
func testSegmented(t *testing.T, open opener) {
	s := open(t, varve.Config{})
	cfg := subscription.Config{Name: "segmented", Start: subscription.FromCheckpointOrBeginning, MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond, PageSize: 16}
	const count, ttl = 8, time.Second
	if !s.Capabilities().Leases {
		cfg := cfg
		cfg.Lease = subscription.Lease{Holder: "a", TTL: ttl, Segments: count}
		err := subscription.Run(t.Context(), s, cfg, nil)
		if !errors.Is(err, varve.ErrNotSupported) {
			t.Fatalf("without leases: %v, want ErrNotSupported", err)
		}
		return
	}
	type handling struct {
		holder  string
		segment int
	}
	var mu sync.Mutex
	handled := map[string][]handling{} // stream@version
	last := map[string]varve.Version{} // stream -> last version handled
	var problems []string
	count2 := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(handled)
	}
	work := func(holder string) func(context.Context, *subscription.Subscription) error {
		return func(ctx context.Context, sub *subscription.Subscription) error {
			segment, _ := sub.Segment()
			return sub.Run(ctx, func(_ context.Context, e varve.RecordedEvent) error {
				mu.Lock()
				defer mu.Unlock()
				if got := subscription.SegmentOf(e.Stream, count); got != segment {
					problems = append(problems, fmt.Sprintf("%s in segment %d's run, belongs to %d", e.Stream, segment, got))
				}
				if e.Version != last[e.Stream]+1 {
					problems = append(problems, fmt.Sprintf("%s@%d after version %d", e.Stream, e.Version, last[e.Stream]))
				}
				last[e.Stream] = e.Version
				key := fmt.Sprintf("%s@%d", e.Stream, e.Version)
				handled[key] = append(handled[key], handling{holder, segment})
				return nil
			})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	stops := map[string]context.CancelFunc{}
	start := func(holder string) {
		ctx, stop := context.WithCancel(t.Context())
		stops[holder] = stop
		cfg := cfg
		cfg.Lease = subscription.Lease{Holder: holder, TTL: ttl, Segments: count}
		wg.Go(func() { errs <- subscription.RunWith(ctx, s, cfg, work(holder)) })
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	waitFor := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a bound on a hang, not a timing assertion
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	balanced := func(want map[string]int) func() bool {
		return func() bool {
			members, segs, err := subscription.SegmentStatus(t.Context(), s, cfg.Name, count)
			if err != nil {
				t.Fatal(err)
			}
			if len(members) != len(want) {
				return false
			}
			got := map[string]int{}
			for _, sh := range segs {
				got[sh.Holder]++
			}
			for h, n := range want {
				if got[h] != n {
					return false
				}
			}
			return true
		}
	}
	appendRound := func(round int) {
		for i := range 24 {
			if _, err := s.Append(t.Context(), fmt.Sprintf("acct-%d", i), varve.Any, varve.NewEvent("Moved", nil)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(fmt.Sprintf("round %d handled", round), func() bool { return count2() == 24*round })
	}
	start("a")
	waitFor("a to hold every segment", balanced(map[string]int{"a": 8}))
	appendRound(1)
	start("b")
	start("c")
	waitFor("3 holders to share the segments", balanced(map[string]int{"a": 3, "b": 3, "c": 2}))
	appendRound(2)
	stops["b"]()
	waitFor("2 holders to share the segments", balanced(map[string]int{"a": 4, "c": 4}))
	appendRound(3)
	_, segs, err := subscription.SegmentStatus(t.Context(), s, cfg.Name, count)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range segs {
		if sh.Holder == "" || sh.Token == 0 {
			t.Errorf("segment %d: %+v", sh.Segment, sh)
		}
	}
	for _, stop := range stops {
		stop()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %v", len(problems), problems[:min(5, len(problems))])
	}
	for key, hs := range handled {
		if len(hs) != 1 {
			t.Errorf("%s handled %d times: %v", key, len(hs), hs)
		}
	}
	// Stopped, every lease is released: nobody is listed.
	members, segs, err := subscription.SegmentStatus(t.Context(), s, cfg.Name, count)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range segs {
		if sh.Holder != "" || !sh.CheckpointOK {
			t.Errorf("after stopping, segment %d: %+v", sh.Segment, sh)
		}
	}
	if len(members) != 0 {
		t.Errorf("members after stopping: %v", members)
	}
}
