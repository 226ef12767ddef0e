package subscription_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/subscription"
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(childEnv); kind != "" {
		os.Exit(runChild(kind))
	}
	goleak.VerifyTestMain(m)
}

// noWatch hides the backend's optional capabilities, like a backend that
// cannot notify and keeps no checkpoints.
type noWatch struct{ varve.Backend }

func newStore(t *testing.T, watch bool) *varve.Store {
	t.Helper()
	var b varve.Backend = memory.New()
	if !watch {
		b = noWatch{b}
	}
	s, err := varve.New(b, varve.Config{PageSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// appendN appends n events and returns the position of the last. Tests
// take their end positions from here rather than from LastPosition, which
// on PostgreSQL stays behind while any transaction of the server (another
// package's test) is open.
func appendN(t *testing.T, s *varve.Store, stream, typ string, n int) varve.Position {
	t.Helper()
	var last varve.Position
	for range n {
		appendTo := s.Append
		if strings.HasPrefix(stream, varve.SystemPrefix) {
			appendTo = s.System().Append
		}
		res, err := appendTo(context.Background(), stream, varve.Any, varve.Event{Type: typ})
		if err != nil {
			t.Fatal(err)
		}
		last = res.Position
	}
	return last
}

// waitForEnd waits until the store's LastPosition has reached end, for
// tests of subscriptions that start from the end: on PostgreSQL it stays
// behind while another transaction of the server is open.
func waitForEnd(t *testing.T, s *varve.Store, end varve.Position) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		last, err := s.LastPosition(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !last.Less(end) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("LastPosition %v never reached %v", last, end)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ids(evs []varve.RecordedEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s@%d", e.Stream, e.Version))
	}
	return out
}

// drain reads until the subscription has read through pos.
func drain(t *testing.T, sub *subscription.Subscription, through varve.Position) []varve.RecordedEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []varve.RecordedEvent
	for sub.Position().Less(through) {
		b, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		got = append(got, b.Events...)
	}
	return got
}

func TestFilters(t *testing.T) {
	t.Parallel()
	eachBackend(t, testFilters)
}

func testFilters(t *testing.T, open opener) {
	s := open(t, varve.Config{PageSize: 4})
	appendN(t, s, "order-1", "Placed", 2)
	appendN(t, s, "user-1", "Joined", 1)
	appendN(t, s, "order-2", "Paid", 1)
	appendN(t, s, "$parked-x", "varve.parked", 1)
	end := appendN(t, s, "order-1", "Paid", 1)

	for _, tc := range []struct {
		name string
		cfg  subscription.Config
		want []string
	}{
		{"all", subscription.Config{}, []string{"order-1@1", "order-1@2", "user-1@1", "order-2@1", "order-1@3"}},
		{"all with system streams", subscription.Config{SystemStreams: true}, []string{"order-1@1", "order-1@2", "user-1@1", "order-2@1", "$parked-x@1", "order-1@3"}},
		{"$all is no filter", subscription.Config{Stream: varve.AllStream}, []string{"order-1@1", "order-1@2", "user-1@1", "order-2@1", "order-1@3"}},
		{"one stream", subscription.Config{Stream: "order-1"}, []string{"order-1@1", "order-1@2", "order-1@3"}},
		{"category", subscription.Config{Filter: varve.Filter{StreamPrefixes: []string{"order-"}}}, []string{"order-1@1", "order-1@2", "order-2@1", "order-1@3"}},
		{"categories", subscription.Config{Filter: varve.Filter{Categories: []string{"order", "user"}}}, []string{"order-1@1", "order-1@2", "user-1@1", "order-2@1", "order-1@3"}},
		{"category, prefix and type", subscription.Config{Filter: varve.Filter{Categories: []string{"order"}, StreamPrefixes: []string{"order-1"}, Types: []string{"Paid"}}}, []string{"order-1@3"}},
		{"system category", subscription.Config{Filter: varve.Filter{Categories: []string{"$parked"}}, SystemStreams: true}, []string{"$parked-x@1"}},
		{"two categories", subscription.Config{Filter: varve.Filter{StreamPrefixes: []string{"user-", "order-2"}}}, []string{"user-1@1", "order-2@1"}},
		{"event type", subscription.Config{Filter: varve.Filter{Types: []string{"Paid"}}}, []string{"order-2@1", "order-1@3"}},
		{"category and type", subscription.Config{Filter: varve.Filter{StreamPrefixes: []string{"order-"}, Types: []string{"Placed"}}}, []string{"order-1@1", "order-1@2"}},
		{"nothing matches", subscription.Config{Filter: varve.Filter{Types: []string{"Nope"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "filters"
			sub, err := subscription.Open(context.Background(), s, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(drain(t, sub, end)); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	eachBackend(t, testStart)
}

func testStart(t *testing.T, open opener) {
	ctx := context.Background()
	s := open(t, varve.Config{PageSize: 4})
	mid := appendN(t, s, "a", "E", 3)
	end := appendN(t, s, "b", "E", 2)
	waitForEnd(t, s, end)
	cps := subscription.NewMemoryCheckpoints()
	if err := cps.SaveCheckpoint(ctx, "saved", mid); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, sub string
		from      subscription.From
		pos       varve.Position
		want      varve.Position
		resumed   bool
	}{
		{"checkpoint or beginning, none saved", "new", subscription.FromCheckpointOrBeginning, varve.Start, varve.Start, false},
		{"checkpoint or beginning, saved", "saved", subscription.FromCheckpointOrBeginning, varve.Start, mid, true},
		{"checkpoint or end, none saved", "new", subscription.FromCheckpointOrEnd, varve.Start, end, false},
		{"checkpoint or end, saved", "saved", subscription.FromCheckpointOrEnd, varve.Start, mid, true},
		{"beginning ignores the checkpoint", "saved", subscription.FromBeginning, varve.Start, varve.Start, false},
		{"end ignores the checkpoint", "saved", subscription.FromEnd, varve.Start, end, false},
		{"position", "saved", subscription.FromPosition, mid, mid, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := subscription.Open(ctx, s, subscription.Config{Name: tc.sub, Start: tc.from, Position: tc.pos, Checkpoints: cps})
			if err != nil {
				t.Fatal(err)
			}
			if got, resumed := sub.StartPosition(); got != tc.want || resumed != tc.resumed {
				t.Fatalf("start %v resumed %v, want %v %v", got, resumed, tc.want, tc.resumed)
			}
		})
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	t.Parallel()
	s := newStore(t, true)
	for _, cfg := range []subscription.Config{
		{},
		{Name: string(make([]byte, subscription.MaxNameLen+1))},
		{Name: "x", Start: subscription.FromPosition + 1},
		{Name: "x", PageSize: -1},
	} {
		if _, err := subscription.Open(context.Background(), s, cfg); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("config %+v: got %v, want ErrInvalidArgument", cfg, err)
		}
	}
}

// TestLive: a caught-up subscription wakes up for new events, through the
// backend's notification, or by polling on a backend that cannot notify.
func TestLive(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, open opener) {
		s := open(t, varve.Config{PageSize: 4})
		// A safety poll far longer than the test proves the wake-up.
		maxPoll := time.Hour
		if !s.Capabilities().Watch {
			maxPoll = 20 * time.Millisecond
		}
		testLive(t, s, maxPoll)
	})
	t.Run("polling", func(t *testing.T) {
		t.Parallel()
		testLive(t, newStore(t, false), 20*time.Millisecond)
	})
}

func testLive(t *testing.T, s *varve.Store, maxPoll time.Duration) {
	sub, err := subscription.Open(context.Background(), s, subscription.Config{Name: "live", MaxPoll: maxPoll})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := make(chan []string)
	go func() {
		var all []string
		for len(all) < 3 {
			b, err := sub.Next(ctx)
			if err != nil {
				t.Error(err)
				break
			}
			all = append(all, ids(b.Events)...)
		}
		got <- all
	}()
	time.Sleep(30 * time.Millisecond) // let the reader catch up and wait
	appendN(t, s, "live-1", "E", 3)
	if g := <-got; !slices.Equal(g, []string{"live-1@1", "live-1@2", "live-1@3"}) {
		t.Fatalf("got %v", g)
	}
}

func TestNextHonoursContext(t *testing.T) {
	t.Parallel()
	s := newStore(t, true)
	sub, err := subscription.Open(context.Background(), s, subscription.Config{Name: "ctx"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
}

// TestRun: the checkpoint covers the handled events, a failed handler stops
// the run before its event, and the next run resumes there.
func TestRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, testRun)
}

func testRun(t *testing.T, open opener) {
	s := open(t, varve.Config{PageSize: 4})
	appendN(t, s, "r", "E", 10)
	ctx := context.Background()
	var pos []varve.Position // of versions 1..10
	for e, err := range s.ReadStream(ctx, "r") {
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, e.Position)
	}
	boom := errors.New("boom")
	var seen []varve.Version
	handler := func(failAt varve.Version) subscription.Handler {
		return func(_ context.Context, e varve.RecordedEvent) error {
			if e.Version == failAt {
				return boom
			}
			seen = append(seen, e.Version)
			return nil
		}
	}

	sub, err := subscription.Open(ctx, s, subscription.Config{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Run(ctx, handler(7)); !errors.Is(err, boom) {
		t.Fatalf("run: got %v, want boom", err)
	}
	cp, ok, err := sub.LoadCheckpoint(ctx)
	if err != nil || !ok || cp != pos[5] {
		t.Fatalf("checkpoint %v %v %v, want %v (version 6)", cp, ok, err, pos[5])
	}

	sub, err = subscription.Open(ctx, s, subscription.Config{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- sub.Run(rctx, handler(0)) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if cp, _, _ := sub.LoadCheckpoint(ctx); cp == pos[9] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("checkpoint never reached 10")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
	if want := []varve.Version{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(seen, want) {
		t.Fatalf("handled %v, want %v", seen, want)
	}

	// A handler that fails because ctx ended is not a failed event: Run
	// returns nil, with the checkpoint before the event it was handling.
	appendN(t, s, "r", "E", 2)
	sub, err = subscription.Open(ctx, s, subscription.Config{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel = context.WithCancel(ctx)
	defer cancel()
	err = sub.Run(rctx, func(ctx context.Context, e varve.RecordedEvent) error {
		if e.Version == 12 {
			cancel()
			return fmt.Errorf("load: %w", ctx.Err())
		}
		seen = append(seen, e.Version)
		return nil
	})
	if err != nil {
		t.Fatalf("run that ended in its handler: %v", err)
	}
	var v11 varve.Position
	for e, err := range s.ReadStream(ctx, "r", varve.From(11)) {
		if err != nil {
			t.Fatal(err)
		}
		v11 = e.Position
		break
	}
	if cp, ok, err := sub.LoadCheckpoint(ctx); err != nil || !ok || cp != v11 || seen[len(seen)-1] != 11 {
		t.Fatalf("checkpoint %v %v %v, handled %v; want %v (version 11)", cp, ok, err, seen, v11)
	}
}

// TestCheckpointStore: which store keeps the checkpoint.
func TestCheckpointStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own := subscription.NewMemoryCheckpoints()
	withCps := newStore(t, true)
	for _, tc := range []struct {
		name    string
		store   *varve.Store
		cps     varve.CheckpointStore
		want    varve.CheckpointStore
		durable bool
	}{
		{"the backend's", withCps, nil, nil, withCps.Features().Durable},
		{"configured", withCps, own, own, true},
		{"none: memory", newStore(t, false), nil, nil, false},
	} {
		sub, err := subscription.Open(ctx, tc.store, subscription.Config{Name: "cps", Checkpoints: tc.cps})
		if err != nil {
			t.Fatal(err)
		}
		if tc.want != nil && sub.Checkpoints() != tc.want {
			t.Errorf("%s: checkpoints kept in %T", tc.name, sub.Checkpoints())
		}
		_, isMem := sub.Checkpoints().(*subscription.MemoryCheckpoints)
		if tc.want == nil && isMem != (tc.store != withCps) {
			t.Errorf("%s: checkpoints kept in %T", tc.name, sub.Checkpoints())
		}
		if sub.DurableCheckpoints() != tc.durable {
			t.Errorf("%s: durable %v, want %v", tc.name, sub.DurableCheckpoints(), tc.durable)
		}
		if err := sub.SaveCheckpoint(ctx, varve.Position{Seq: 7}); err != nil {
			t.Fatal(err)
		}
		if p, ok, err := sub.LoadCheckpoint(ctx); err != nil || !ok || p.Seq != 7 {
			t.Errorf("%s: load %v %v %v", tc.name, p, ok, err)
		}
		if tc.store == withCps && tc.cps == nil {
			if p, ok, err := withCps.Checkpoints().Load(ctx, "cps"); err != nil || !ok || p.Seq != 7 {
				t.Errorf("%s: the store's checkpoint: %v %v %v", tc.name, p, ok, err)
			}
		}
	}
}
