package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/internal/deliverytest"
	"github.com/varve-go/varve/subscription"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	quiet    = deliverytest.Quiet
	newStore = deliverytest.NewStore
	fill     = deliverytest.Fill
	start    = deliverytest.Start
)

// recorder is a sink that records successful deliveries per stream and
// checks that a stream never has two deliveries in flight.
type recorder struct {
	mu        sync.Mutex
	got       map[string][]varve.Version
	inFlight  map[string]int
	overlaps  int
	calls     atomic.Int64
	poisoned  atomic.Bool
	latency   func(d delivery.Delivery) time.Duration
	fail      func(d delivery.Delivery) error
	perStream bool
}

func newRecorder(perStream bool) *recorder {
	return &recorder{got: map[string][]varve.Version{}, inFlight: map[string]int{}, perStream: perStream}
}

func (r *recorder) Deliver(ctx context.Context, d delivery.Delivery) error {
	r.calls.Add(1)
	r.mu.Lock()
	r.inFlight[d.Event.Stream]++
	if r.inFlight[d.Event.Stream] > 1 {
		r.overlaps++
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight[d.Event.Stream]--
		r.mu.Unlock()
	}()
	if r.latency != nil {
		if err := sleepCtx(ctx, r.latency(d)); err != nil {
			return err
		}
	}
	if r.fail != nil {
		if err := r.fail(d); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.got[d.Event.Stream] = append(r.got[d.Event.Stream], d.Event.Version)
	r.mu.Unlock()
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func isSystem(stream string) bool { return strings.HasPrefix(stream, "$") }

// versions returns the versions of every stream of the store that skip
// does not skip.
func versions(t testing.TB, s *varve.Store, skip func(string) bool) map[string][]varve.Version {
	t.Helper()
	out := map[string][]varve.Version{}
	for e, err := range s.ReadAll(context.Background(), varve.Start) {
		if err != nil {
			t.Fatal(err)
		}
		if skip == nil || !skip(e.Stream) {
			out[e.Stream] = append(out[e.Stream], e.Version)
		}
	}
	return out
}

// TestOrder: random latencies per stream and random failures; in per-stream
// mode every stream arrives in version order with one delivery in flight at
// a time; in both modes every event arrives.
func TestOrder(t *testing.T) {
	t.Parallel()
	eachBackend(t, testOrder)
}

func testOrder(t *testing.T, open opener) {
	for _, tc := range []struct {
		ordering    delivery.Ordering
		concurrency int
		window      int
	}{
		{delivery.PerStream, 1, 0},
		{delivery.PerStream, 16, 0},
		{delivery.PerStream, 64, 32},
		{delivery.Unordered, 16, 0},
	} {
		t.Run(fmt.Sprintf("%v/c=%d/window=%d", tc.ordering, tc.concurrency, tc.window), func(t *testing.T) {
			t.Parallel()
			s := open(t, varve.Config{})
			end := fill(t, s, "order", 40, 1500, 7)
			rec := newRecorder(tc.ordering == delivery.PerStream)
			var rngMu sync.Mutex
			rng := rand.New(rand.NewPCG(uint64(tc.concurrency), 3))
			slow := map[string]time.Duration{}
			rec.latency = func(d delivery.Delivery) time.Duration {
				rngMu.Lock()
				defer rngMu.Unlock()
				base, ok := slow[d.Event.Stream]
				if !ok {
					base = time.Duration(rng.IntN(400)) * time.Microsecond
					slow[d.Event.Stream] = base
				}
				return base + time.Duration(rng.IntN(200))*time.Microsecond
			}
			rec.fail = func(d delivery.Delivery) error {
				rngMu.Lock()
				defer rngMu.Unlock()
				if rng.IntN(10) == 0 {
					return errors.New("random failure")
				}
				return nil
			}
			r := start(t, s, "order", rec, delivery.Config{
				Concurrency: tc.concurrency, Ordering: tc.ordering, Window: tc.window,
				Retry: subscription.RetryPolicy{MaxAttempts: -1, MaxAge: time.Minute, InitialBackoff: 200 * time.Microsecond, MaxBackoff: 2 * time.Millisecond},
			})
			r.Wait(t, end)
			r.Stop(t)

			want := versions(t, s, isSystem)
			st := r.D.Stats()
			if st.Parked != 0 || st.Delivered != 1500 || st.Retries == 0 {
				t.Fatalf("stats %+v: want 1500 delivered, none parked, some retries", st)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for stream, vs := range want {
				got := slices.Clone(rec.got[stream])
				if tc.ordering == delivery.Unordered {
					slices.Sort(got)
				}
				if !slices.Equal(got, vs) {
					t.Fatalf("stream %s: got %v, want %v", stream, got, vs)
				}
			}
			if tc.ordering == delivery.PerStream && rec.overlaps != 0 {
				t.Fatalf("%d deliveries overlapped another of their stream", rec.overlaps)
			}
			if st.Saved != end {
				t.Fatalf("saved checkpoint %v after a clean stop, want %v", st.Saved, end)
			}
		})
	}
}

// TestPoison: one stream always fails. It is parked, the others flow, the
// checkpoint reaches the end, and after a replay the stream flows again.
func TestPoison(t *testing.T) {
	t.Parallel()
	eachBackend(t, testPoison)
}

func testPoison(t *testing.T, open opener) {
	const n, streams = 2000, 50
	latency := func(delivery.Delivery) time.Duration { return 300 * time.Microsecond }
	cfg := delivery.Config{
		Concurrency: 16, ParkedPollInterval: 5 * time.Millisecond, CheckpointInterval: 5 * time.Millisecond,
		Retry: subscription.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond},
	}
	run := func(poisoned bool) (time.Duration, *recorder, *varve.Store, *deliverytest.Running, varve.Position) {
		s := open(t, varve.Config{})
		end := fill(t, s, "flow", streams, n, 11)
		rec := newRecorder(true)
		rec.latency = latency
		rec.poisoned.Store(poisoned)
		rec.fail = func(d delivery.Delivery) error {
			if rec.poisoned.Load() && d.Event.Stream == "flow-3" {
				return errors.New("poison")
			}
			return nil
		}
		began := time.Now()
		r := start(t, s, "poison", rec, cfg)
		r.Wait(t, end)
		return time.Since(began), rec, s, r, end
	}
	clean, _, _, cr, _ := run(false)
	cr.Stop(t)
	poisoned, rec, s, r, end := run(true)
	t.Logf("elapsed without poison %v, with %v (ratio %.2f)", clean, poisoned, poisoned.Seconds()/clean.Seconds())

	all := versions(t, s, isSystem)
	poison := all["flow-3"]
	if len(poison) < 2 {
		t.Fatalf("poison stream has %d events; the test needs at least 2", len(poison))
	}
	st := r.D.Stats()
	if st.Parked != uint64(len(poison)) || st.Delivered != uint64(n-len(poison)) {
		t.Fatalf("stats %+v, want %d parked and %d delivered", st, len(poison), n-len(poison))
	}
	rec.mu.Lock()
	for stream, vs := range all {
		if stream != "flow-3" && !slices.Equal(rec.got[stream], vs) {
			t.Fatalf("stream %s: got %v, want %v", stream, rec.got[stream], vs)
		}
	}
	rec.mu.Unlock()
	parked, err := r.D.Parked().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != len(poison) || parked[0].Reason != delivery.ReasonExhausted || parked[0].Attempts != 4 ||
		parked[1].Reason != delivery.ReasonStreamParked || parked[1].Attempts != 0 {
		t.Fatalf("parked %+v", parked)
	}
	if calls := rec.calls.Load(); calls != int64(n-len(poison)+4) {
		t.Fatalf("%d sink calls, want %d: only the first poison event is tried", calls, n-len(poison)+4)
	}

	// A new event of the parked stream is parked too, in order.
	res, err := s.Append(context.Background(), "flow-3", varve.Any, varve.Event{Type: "Tested"})
	if err != nil {
		t.Fatal(err)
	}
	r.Wait(t, res.Position)
	if got := r.D.Stats().Parked; got != uint64(len(poison)+1) {
		t.Fatalf("parked %d, want %d", got, len(poison)+1)
	}

	// Replay to a sink that takes them: the stream is delivered again.
	replayed := newRecorder(true)
	rr, err := r.D.Parked().Replay(context.Background(), replayed, nil)
	if err != nil || len(rr.Delivered) != len(poison)+1 || len(rr.Failed) != 0 {
		t.Fatalf("replay: %+v, %v", rr, err)
	}
	if want := append(slices.Clone(poison), res.LastVersion); !slices.Equal(replayed.got["flow-3"], want) {
		t.Fatalf("replayed %v, want %v", replayed.got["flow-3"], want)
	}
	rec.poisoned.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for r.D.Stats().ParkedStreams != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the dispatcher never learned of the replay")
		}
		time.Sleep(time.Millisecond)
	}
	res, err = s.Append(context.Background(), "flow-3", varve.Any, varve.Event{Type: "Tested"})
	if err != nil {
		t.Fatal(err)
	}
	r.Wait(t, res.Position)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.got["flow-3"]; !slices.Equal(got, []varve.Version{res.LastVersion}) {
		t.Fatalf("after the replay the stream delivered %v, want [%d]", got, res.LastVersion)
	}
	if st.Checkpoint.Less(end) {
		t.Fatalf("checkpoint %v once the poison was parked, want at least %v", st.Checkpoint, end)
	}
}

// TestFailures: how the dispatcher treats each kind of sink failure.
func TestFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		err          func(attempt int) error
		wantAttempts int
		wantParked   bool
		minElapsed   time.Duration
	}{
		{"permanent parks at once", func(int) error { return delivery.Permanent(errors.New("rejected")) }, 1, true, 0},
		{"transient retried until max attempts", func(int) error { return errors.New("down") }, 3, true, 0},
		{"retry after is honoured", func(a int) error {
			if a == 1 {
				return delivery.RetryAfter(errors.New("busy"), 50*time.Millisecond)
			}
			return nil
		}, 2, false, 50 * time.Millisecond},
		{"recovers on a retry", func(a int) error {
			if a < 3 {
				return errors.New("flaky")
			}
			return nil
		}, 3, false, 0},
		{"panic is a failure", func(a int) error {
			if a == 1 {
				panic("sink bug")
			}
			return nil
		}, 2, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			res, err := s.Append(context.Background(), "f", varve.NoStream, varve.Event{Type: "T"})
			if err != nil {
				t.Fatal(err)
			}
			var attempts []time.Time
			var mu sync.Mutex
			sink := delivery.SinkFunc(func(_ context.Context, d delivery.Delivery) error {
				mu.Lock()
				attempts = append(attempts, time.Now())
				mu.Unlock()
				return tc.err(d.Attempt)
			})
			r := start(t, s, "failures", sink, delivery.Config{
				Retry: subscription.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, Jitter: -1},
			})
			r.Wait(t, res.Position)
			r.Stop(t)
			st := r.D.Stats()
			mu.Lock()
			defer mu.Unlock()
			if len(attempts) != tc.wantAttempts || (st.Parked == 1) != tc.wantParked {
				t.Fatalf("%d attempts, stats %+v; want %d attempts, parked %v", len(attempts), st, tc.wantAttempts, tc.wantParked)
			}
			if gap := attempts[len(attempts)-1].Sub(attempts[0]); gap < tc.minElapsed {
				t.Fatalf("retried after %v, want at least %v", gap, tc.minElapsed)
			}
		})
	}
}

// TestWindow: with a sink that never returns, the reader stops once the
// window is full.
func TestWindow(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	fill(t, s, "w", 1000, 3000, 5)
	release := make(chan struct{})
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	const window = 100
	r := start(t, s, "window", sink, delivery.Config{Concurrency: 4, Window: window, DrainTimeout: time.Millisecond})
	deadline := time.Now().Add(time.Minute)
	for st := r.D.Stats(); st.InFlight < 4 || st.Pending < window; st = r.D.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("the workers and the window never filled: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // a reader that did not stop would read on
	st := r.D.Stats()
	if st.Pending > window+64 || st.Read != uint64(st.Pending) {
		t.Fatalf("stats %+v: want between %d and %d pending (the window plus one page)", st, window, window+64)
	}
	r.Stop(t)
	close(release)
	if st := r.D.Stats(); st.Checkpoint != varve.Start || st.Delivered != 0 {
		t.Fatalf("cancelled deliveries were counted: %+v", st)
	}
}

// TestResume: a dispatcher resumes after the saved checkpoint and sends the
// same idempotency key for a redelivered event.
func TestResume(t *testing.T) {
	t.Parallel()
	eachBackend(t, testResume)
}

func testResume(t *testing.T, open opener) {
	s := open(t, varve.Config{})
	end := fill(t, s, "res", 5, 100, 9)
	keys := map[varve.Position]string{}
	var mu sync.Mutex
	sink := delivery.SinkFunc(func(_ context.Context, d delivery.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if k, ok := keys[d.Event.Position]; ok && k != d.Key {
			return fmt.Errorf("key changed from %s to %s", k, d.Key)
		}
		keys[d.Event.Position] = d.Key
		return nil
	})
	r := start(t, s, "resume", sink, delivery.Config{})
	r.Wait(t, end)
	r.Stop(t)
	more := fill(t, s, "res", 5, 50, 10)
	r = start(t, s, "resume", sink, delivery.Config{})
	r.Wait(t, more)
	r.Stop(t)
	if st := r.D.Stats(); st.Delivered != 50 || st.Saved != more {
		t.Fatalf("second run %+v, want 50 delivered and checkpoint %v", st, more)
	}
	if k := keys[end]; k != "resume:"+end.String() {
		t.Fatalf("key %q", k)
	}
}

// TestAttemptTimeout: an attempt that outlives AttemptTimeout is cancelled
// and counts as a failure.
func TestAttemptTimeout(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	res, err := s.Append(context.Background(), "slow", varve.NoStream, varve.Event{Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		calls.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	began := time.Now()
	r := start(t, s, "timeout", sink, delivery.Config{
		AttemptTimeout: 40 * time.Millisecond,
		Retry:          subscription.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond},
	})
	r.Wait(t, res.Position)
	el := time.Since(began)
	r.Stop(t)
	parked, err := r.D.Parked().List(context.Background())
	if err != nil || len(parked) != 1 || !strings.Contains(parked[0].Error, "timed out") || calls.Load() != 2 {
		t.Fatalf("parked %+v, %v, %d calls", parked, err, calls.Load())
	}
	if el < 80*time.Millisecond {
		t.Fatalf("two attempts of 40ms each took %v", el)
	}
}
