package projection_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/subscription"
)

// eachBackend runs f as a parallel subtest per backend, filters pushed
// down.
func eachBackend(t *testing.T, f func(t *testing.T, s *varve.Store, base projection.Config)) {
	t.Helper()
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		f(t, k.Open(t, varve.Config{}), projection.Config{})
	})
}

// with returns cfg with the settings of base.
func with(base, cfg projection.Config) projection.Config {
	cfg.LocalFilter = base.LocalFilter
	return cfg
}

// appendN appends n events to streams cat-0..cat-(streams-1) in turn and
// returns their ids.
func appendN(t testing.TB, s *varve.Store, cat, typ string, n, streams int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, 0, n)
	for i := range n {
		e := varve.NewEvent(typ, []byte(fmt.Sprintf(`{"n":%d}`, i)))
		if _, err := s.Append(context.Background(), fmt.Sprintf("%s-%d", cat, i%streams), varve.Any, e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

// recorder is a read model that remembers every event it was handed.
type recorder struct {
	mu       sync.Mutex
	seen     map[uuid.UUID]int
	replayed map[uuid.UUID]bool
	last     map[string]varve.Version
	order    []string // per-stream order violations
	fail     func(e varve.RecordedEvent) error
}

func newRecorder() *recorder {
	return &recorder{seen: map[uuid.UUID]int{}, replayed: map[uuid.UUID]bool{}, last: map[string]varve.Version{}}
}

func (r *recorder) handle(_ context.Context, b projection.Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range b.Events {
		if r.fail != nil {
			if err := r.fail(e); err != nil {
				return err
			}
		}
	}
	for _, e := range b.Events {
		if e.Version <= r.last[e.Stream] {
			r.order = append(r.order, fmt.Sprintf("%s@%d after @%d", e.Stream, e.Version, r.last[e.Stream]))
		}
		r.last[e.Stream] = e.Version
		r.seen[e.ID]++
		r.replayed[e.ID] = b.Replaying
	}
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// check reports events missing or seen more than once.
func (r *recorder) check(t *testing.T, want []uuid.UUID) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range want {
		if n := r.seen[id]; n != 1 {
			t.Errorf("event %s handled %d times, want 1", id, n)
		}
	}
	if len(r.seen) != len(want) {
		t.Errorf("%d distinct events handled, want %d", len(r.seen), len(want))
	}
	if len(r.order) > 0 {
		t.Errorf("per-stream order broken: %v", r.order)
	}
}

// waitFor polls cond until it holds; the test's deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// start runs r until the test ends; the returned func stops it and gives
// Run's error.
func start(t *testing.T, r *projection.Runner) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func TestCatchUpThenLive(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
		before := appendN(t, s, "cnt", "Counted", 57, 5)
		appendN(t, s, "other", "Counted", 13, 2)
		rec := newRecorder()
		r, err := projection.NewRunner(s, projection.Projection{Name: "counts", Version: 1,
			Filter: varve.Filter{Categories: []string{"cnt"}}, Handle: rec.handle}, with(base, projection.Config{PageSize: 10}))
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, r)
		waitFor(t, "catch-up", func() bool { return rec.count() == len(before) && r.Status().State == projection.Live })
		after := appendN(t, s, "cnt", "Counted", 23, 5)
		waitFor(t, "live events", func() bool { return rec.count() == len(before)+len(after) })
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		rec.check(t, append(before, after...))
		for _, id := range before {
			if !rec.replayed[id] {
				t.Errorf("event %s of the log before the start not marked Replaying", id)
			}
		}
		for _, id := range after {
			if rec.replayed[id] {
				t.Errorf("live event %s marked Replaying", id)
			}
		}
		st := r.Status()
		last, _ := s.LastPosition(context.Background())
		if st.Position != last || st.Handled != int64(len(before)+len(after)) || st.LastError != "" {
			t.Errorf("status %+v, want position %v, %d handled, no error", st, last, len(before)+len(after))
		}
		// A restart resumes from the checkpoint: nothing is handled again.
		more := appendN(t, s, "cnt", "Counted", 4, 2)
		r2, err := projection.NewRunner(s, projection.Projection{Name: "counts", Version: 1,
			Filter: varve.Filter{Categories: []string{"cnt"}}, Handle: rec.handle}, with(base, projection.Config{}))
		if err != nil {
			t.Fatal(err)
		}
		stop = start(t, r2)
		waitFor(t, "resume", func() bool { return rec.count() == len(before)+len(after)+len(more) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		rec.check(t, append(append(before, after...), more...))
	})
}

func TestPoison(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy projection.Policy
	}{{"park", projection.Park}, {"stop", projection.Stop}} {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
				ctx := context.Background()
				good1 := appendN(t, s, "cnt", "Counted", 7, 2)
				bad := appendN(t, s, "cnt", "Bad", 1, 1)[0]
				good2 := appendN(t, s, "cnt", "Counted", 5, 2)
				rec := newRecorder()
				boom := errors.New("boom")
				rec.fail = func(e varve.RecordedEvent) error {
					if e.Type == "Bad" {
						return boom
					}
					return nil
				}
				r, err := projection.NewRunner(s, projection.Projection{Name: "p", Version: 1, Handle: rec.handle},
					with(base, projection.Config{Retry: subscription.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}, Poison: tc.policy}))
				if err != nil {
					t.Fatal(err)
				}
				if tc.policy == projection.Stop {
					err := r.Run(ctx)
					if !errors.Is(err, projection.ErrStopped) || !errors.Is(err, boom) {
						t.Fatalf("Run = %v, want ErrStopped and the handler's error", err)
					}
					rec.check(t, good1)
					if st := r.Status(); st.State != projection.Failed || st.LastError == "" {
						t.Errorf("status %+v, want failed with the error", st)
					}
					return
				}
				stop := start(t, r)
				waitFor(t, "every good event", func() bool { return rec.count() == len(good1)+len(good2) })
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				rec.check(t, append(good1, good2...))
				// Parked as a delivery parks, under the version's checkpoint
				// name: listed, counted and skipped by the same API.
				p := delivery.NewParked(s, projection.CheckpointName("p", 1))
				parked, err := p.List(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(parked) != 1 || parked[0].EventID != bad || parked[0].Error != "boom" || parked[0].Reason != delivery.ReasonExhausted ||
					parked[0].Subscription != projection.CheckpointName("p", 1) {
					t.Errorf("parked %+v, want the one bad event %s", parked, bad)
				}
				if st := r.Status(); st.Parked != 1 {
					t.Errorf("status %+v, want 1 parked", st)
				}
				if info, err := projection.Inspect(ctx, s, "p"); err != nil || info.Parked != 1 || len(info.Versions) != 1 || info.Versions[0].Parked != 1 {
					t.Errorf("inspect: %+v %v, want 1 parked", info, err)
				}
				c, listed, err := delivery.InspectConsumer(ctx, s, projection.CheckpointName("p", 1), -1)
				if err != nil || c.Parked != 1 || len(listed) != 1 {
					t.Errorf("the consumer of the version: %+v %v %v, want 1 parked", c, listed, err)
				}
				if _, err := p.Skip(ctx, func(delivery.ParkedEvent) bool { return true }); err != nil {
					t.Fatal(err)
				}
				if info, err := projection.Inspect(ctx, s, "p"); err != nil || info.Parked != 0 {
					t.Errorf("inspect after a skip: %+v %v, want 0 parked", info, err)
				}
			})
		})
	}
}

func TestPauseResume(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
		first := appendN(t, s, "cnt", "Counted", 9, 3)
		rec := newRecorder()
		r, err := projection.NewRunner(s, projection.Projection{Name: "p", Version: 1, Handle: rec.handle}, with(base, projection.Config{}))
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, r)
		waitFor(t, "catch-up", func() bool { return rec.count() == len(first) })
		r.Pause()
		waitFor(t, "pause", func() bool { return r.Status().State == projection.Paused })
		second := appendN(t, s, "cnt", "Counted", 6, 3)
		// A paused runner waits before it reads: nothing moves until Resume.
		if n := rec.count(); n != len(first) {
			t.Errorf("%d events handled while paused, want %d", n, len(first))
		}
		r.Resume()
		waitFor(t, "resume", func() bool { return rec.count() == len(first)+len(second) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		rec.check(t, append(first, second...))
	})
}

// TestRebuild builds version 2 of a projection in a shadow while version
// 1 serves and events keep coming; version 2 becomes current when it has
// caught up, and has handled every event exactly once.
func TestRebuild(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
		ctx := context.Background()
		var mu sync.Mutex
		ids := appendN(t, s, "cnt", "Counted", 40, 4)
		v1, v2 := newRecorder(), newRecorder()
		proj := func(version int, rec *recorder) *projection.Runner {
			r, err := projection.NewRunner(s, projection.Projection{Name: "counts", Version: version,
				Filter: varve.Filter{Categories: []string{"cnt"}}, Handle: rec.handle}, with(base, projection.Config{PageSize: 7, Promote: true}))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		current := func(want int) func() bool {
			return func() bool {
				v, ok, err := projection.Current(ctx, s, "counts")
				if err != nil {
					t.Fatal(err)
				}
				return ok && v == want
			}
		}
		stop1 := start(t, proj(1, v1))
		waitFor(t, "version 1 current", current(1))
		wctx, stopWriter := context.WithCancel(ctx)
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			for i := 0; wctx.Err() == nil; i++ {
				e := varve.NewEvent("Counted", []byte(`{}`))
				// Not wctx: an append cancelled late may still commit.
				if _, err := s.Append(ctx, fmt.Sprintf("cnt-w%d", i%3), varve.Any, e); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids = append(ids, e.ID)
				mu.Unlock()
			}
		}()
		waitFor(t, "live writes", func() bool { mu.Lock(); defer mu.Unlock(); return len(ids) > 60 })
		stop2 := start(t, proj(2, v2))
		waitFor(t, "version 2 current", current(2))
		mu.Lock()
		atSwitch := len(ids)
		mu.Unlock()
		waitFor(t, "writes after the switch", func() bool { mu.Lock(); defer mu.Unlock(); return len(ids) > atSwitch+5 })
		stopWriter()
		<-writerDone
		waitFor(t, "both versions at the head", func() bool { return v1.count() >= len(ids) && v2.count() >= len(ids) })
		if err := stop1(); err != nil {
			t.Fatal(err)
		}
		if err := stop2(); err != nil {
			t.Fatal(err)
		}
		v1.check(t, ids)
		v2.check(t, ids)
		for _, id := range ids[:40] {
			if !v2.replayed[id] {
				t.Errorf("version 2 did not mark event %s of its rebuild Replaying", id)
			}
		}
		if !v2.replayed[ids[39]] || v2.replayed[ids[len(ids)-1]] {
			t.Errorf("the last event, written after version 2 started, is marked Replaying")
		}
		// A restarted version 1 does not take the switch back.
		stop1 = start(t, proj(1, v1))
		waitFor(t, "version 1 live again", func() bool { return v1.count() == len(ids) })
		if err := stop1(); err != nil {
			t.Fatal(err)
		}
		if !current(2)() {
			t.Errorf("version 1 took the switch back")
		}
		if err := projection.Drop(ctx, s, "counts", 2, nil); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("Drop of the current version = %v, want ErrInvalidArgument", err)
		}
		dropped := false
		if err := projection.Drop(ctx, s, "counts", 1, func(context.Context) error { dropped = true; return nil }); err != nil || !dropped {
			t.Errorf("Drop of version 1 = %v, dropped %v", err, dropped)
		}
	})
}

// TestControl drives a running runner through its control stream, as
// `varve projections` does: pause, resume, an in-place rebuild (Reset, then
// every event again, exactly once), a failure recorded and cleared; and
// checks what Inspect and List read from the store at each step.
func TestControl(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
		ctx := context.Background()
		first := appendN(t, s, "cnt", "Counted", 12, 3)
		var mu sync.Mutex
		rec := newRecorder()
		resets := 0
		p := projection.Projection{Name: "ctl", Version: 1, Filter: varve.Filter{Categories: []string{"cnt"}},
			Handle: func(ctx context.Context, b projection.Batch) error {
				mu.Lock()
				r := rec
				mu.Unlock()
				return r.handle(ctx, b)
			},
			Reset: func(context.Context, int) error {
				mu.Lock()
				defer mu.Unlock()
				rec, resets = newRecorder(), resets+1
				return nil
			}}
		cur := func() *recorder { mu.Lock(); defer mu.Unlock(); return rec }
		cfg := with(base, projection.Config{ControlPoll: 5 * time.Millisecond, PageSize: 5})
		r, err := projection.NewRunner(s, p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		inspect := func() projection.Info {
			info, err := projection.Inspect(ctx, s, "ctl")
			if err != nil {
				t.Fatal(err)
			}
			return info
		}
		stop := start(t, r)
		<-r.Live()
		if info := inspect(); len(info.Versions) != 1 || info.Versions[0].State != "live" || info.Paused {
			t.Fatalf("after catch-up: %+v", info)
		}

		if err := projection.Pause(ctx, s, "ctl"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "pause", func() bool { return r.Status().State == projection.Paused })
		second := appendN(t, s, "cnt", "Counted", 6, 3)
		if info := inspect(); !info.Paused || info.Versions[0].State != "paused" {
			t.Fatalf("after Pause: %+v", info)
		}
		if n := cur().count(); n != len(first) {
			t.Errorf("%d events handled while paused, want %d", n, len(first))
		}
		if err := projection.Resume(ctx, s, "ctl"); err != nil {
			t.Fatal(err)
		}
		all := append(first, second...)
		waitFor(t, "resume", func() bool { return cur().count() == len(all) })

		if err := projection.Rebuild(ctx, s, "ctl", 1); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "rebuild", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return resets == 1 && rec.count() == len(all)
		})
		waitFor(t, "live after the rebuild", func() bool { return r.Status().State == projection.Live })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		rebuilt := cur()
		rebuilt.check(t, all)
		for _, id := range all {
			if !rebuilt.replayed[id] {
				t.Errorf("event %s of the rebuild not marked Replaying", id)
			}
		}
		if info := inspect(); info.Versions[0].RebuildPending || info.Versions[0].State != "live" {
			t.Fatalf("after the rebuild: %+v", info.Versions)
		}

		// A poison event stops it: the failure is in the store until the
		// runner reaches the head again.
		bad := appendN(t, s, "cnt", "Bad", 1, 1)
		boom := errors.New("boom")
		bp := p
		bp.Handle = func(ctx context.Context, b projection.Batch) error {
			for _, e := range b.Events {
				if e.Type == "Bad" {
					return boom
				}
			}
			return p.Handle(ctx, b)
		}
		fcfg := cfg
		fcfg.Retry = subscription.RetryPolicy{MaxAttempts: 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
		fr, err := projection.NewRunner(s, bp, fcfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := fr.Run(ctx); !errors.Is(err, projection.ErrStopped) {
			t.Fatalf("Run = %v, want ErrStopped", err)
		}
		info := inspect()
		if info.Failure == nil || info.Failure.Version != 1 || info.Versions[0].State != "failed" {
			t.Fatalf("after the failure: %+v %+v", info.Failure, info.Versions)
		}
		r2, err := projection.NewRunner(s, p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		stop = start(t, r2)
		<-r2.Live()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		cur().check(t, append(all, bad...))
		if info := inspect(); info.Failure != nil || info.Versions[0].State != "live" {
			t.Fatalf("after the recovery: %+v %+v", info.Failure, info.Versions)
		}
		names, err := projection.List(ctx, s)
		if err != nil {
			if errors.Is(err, varve.ErrNotSupported) {
				return
			}
			t.Fatal(err)
		}
		if len(names) != 1 || names[0] != "ctl" {
			t.Fatalf("List = %v, want [ctl]", names)
		}
	})
}

// headAhead is a backend on which another writer appends an event each
// time the head is looked at: the head seen anew is always further on.
type headAhead struct {
	varve.Backend
	n atomic.Int64
}

func (h *headAhead) Unwrap() varve.Backend { return h.Backend }

func (h *headAhead) LastPosition(ctx context.Context) (varve.Position, error) {
	e := varve.NewEvent("Counted", []byte(fmt.Sprintf(`{"n":%d}`, h.n.Add(1))))
	if _, err := h.Backend.Append(ctx, varve.AppendRequest{Stream: "cnt-w", Expected: varve.Any, Events: []varve.Event{e}, Category: "cnt"}); err != nil {
		return varve.Position{}, err
	}
	return h.Backend.LastPosition(ctx)
}

// TestLiveUnderSteadyAppends: a runner goes live, and a rebuild is
// promoted, although every look at the head finds a new event after it.
func TestLiveUnderSteadyAppends(t *testing.T) {
	b := &headAhead{Backend: memory.New()}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendN(t, s, "cnt", "Counted", 20, 3)
	rec := newRecorder()
	r, err := projection.NewRunner(s, projection.Projection{Name: "counts", Version: 1,
		Filter: varve.Filter{Categories: []string{"cnt"}}, Handle: rec.handle}, projection.Config{PageSize: 4, Promote: true})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, r)
	select {
	case <-r.Live():
	case <-time.After(time.Minute):
		t.Fatalf("not live after %d looks at the head: %+v", b.n.Load(), r.Status())
	}
	waitFor(t, "version 1 current", func() bool {
		v, ok, err := projection.Current(context.Background(), s, "counts")
		if err != nil {
			t.Fatal(err)
		}
		return ok && v == 1
	})
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestInspectLagByFilter: Inspect counts a version's lag by the filter its
// runner reads with: events of other categories are no lag (they were
// before: every event but system streams' counted).
func TestInspectLagByFilter(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
		rec := newRecorder()
		r, err := projection.NewRunner(s, projection.Projection{Name: "lagf", Version: 1,
			Filter: varve.Filter{Categories: []string{"lagf"}}, Handle: rec.handle}, with(base, projection.Config{ControlPoll: -1}))
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, s, "lagf", "Counted", 2, 1)
		stop := start(t, r)
		<-r.Live()
		waitFor(t, "2 events handled", func() bool { return rec.count() == 2 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if info, err := projection.Inspect(t.Context(), s, "lagf"); err != nil || info.Versions[0].Pending != nil {
			t.Fatalf("caught up, pending since %v (%v), want nil", info.Versions[0].Pending, err)
		}
		before := time.Now()
		appendN(t, s, "lagf", "Counted", 3, 2)
		appendN(t, s, "lagother", "Counted", 4, 2)
		info, err := projection.Inspect(t.Context(), s, "lagf")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Versions) != 1 || info.Versions[0].Lag != 3 || info.Versions[0].LagMore {
			t.Fatalf("versions %+v: want a lag of 3", info.Versions)
		}
		// The lag in time: the oldest of the three was recorded after the
		// runner stopped (store clocks run within a second of this one).
		if p := info.Versions[0].Pending; p == nil || p.Before(before.Add(-time.Second)) || p.After(time.Now().Add(time.Second)) {
			t.Fatalf("pending since %v, want about %v", p, before)
		}
	})
}
