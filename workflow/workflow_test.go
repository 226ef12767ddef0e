package workflow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// receiver deduplicates by command id, as the command bus will.
type receiver struct {
	mu     sync.Mutex
	got    map[uuid.UUID]Command
	sends  int
	failAt int // when > 0, the failAt-th send is "killed" after delivery
}

func (r *receiver) Send(_ context.Context, c Command) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sends++
	if r.got == nil {
		r.got = map[uuid.UUID]Command{}
	}
	r.got[c.ID] = c
	if r.sends == r.failAt {
		return errors.New("killed after delivery")
	}
	return nil
}

type order struct{ Status string }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func orderDef(name string) Definition[order] {
	return Definition[order]{
		Name: name,
		Route: func(e *varve.RecordedEvent) (string, bool) {
			return string(e.Data), e.Type == "OrderPlaced" || e.Type == "PaymentTaken"
		},
		Evolve: func(s order, e *varve.RecordedEvent) order {
			s.Status = e.Type
			return s
		},
		Decide: func(s order, in Input) (Decision, error) {
			switch {
			case in.Type == "OrderPlaced" && s.Status == "":
				return Decision{
					Events:   []varve.Event{{Type: "placed"}},
					Commands: []Command{{Type: "TakePayment"}},
					Timers:   []Timer{{ID: "payment", Due: t0.Add(10 * time.Minute)}},
				}, nil
			case in.Type == "PaymentTaken" && s.Status == "placed":
				return Decision{Events: []varve.Event{{Type: "paid"}}, Commands: []Command{{Type: "Ship"}}, Cancel: []string{"payment"}}, nil
			case in.Timer == "payment" && s.Status == "placed":
				return Decision{Events: []varve.Event{{Type: "cancelled"}}, Commands: []Command{{Type: "Refund"}}}, nil
			}
			return Decision{}, nil
		},
	}
}

type fixture struct {
	store *varve.Store
	name  string
	clock *fakeClock
	recv  *receiver
}

func newFixture(t *testing.T, k teststore.Kind) *fixture {
	return &fixture{store: k.Open(t, varve.Config{}), name: fmt.Sprintf("wf%x", rand.Uint64()), clock: &fakeClock{now: t0}, recv: &receiver{}}
}

func (f *fixture) runner(t *testing.T) *Runner[order] {
	r, err := NewRunner(f.store, orderDef(f.name), f.recv, f.clock)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// input appends an input event to a source stream and returns it as recorded.
func (f *fixture) input(t *testing.T, typ, id string) varve.RecordedEvent {
	t.Helper()
	ctx := context.Background()
	src := f.name + "src-" + id
	res, err := f.store.Append(ctx, src, varve.Any, varve.NewEvent(typ, []byte(id)))
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range f.store.ReadStream(ctx, src, varve.From(res.FirstVersion)) {
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	t.Fatal("input not read back")
	return varve.RecordedEvent{}
}

// last is the position of the last event of the instance stream.
func (f *fixture) last(t *testing.T, stream string) varve.Position {
	t.Helper()
	var p varve.Position
	for e, err := range f.store.ReadStream(context.Background(), stream) {
		if err != nil {
			t.Fatal(err)
		}
		p = e.Position
	}
	return p
}

func (f *fixture) count(t *testing.T, stream, typ string) int {
	t.Helper()
	n := 0
	for e, err := range f.store.ReadStream(context.Background(), stream) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == typ {
			n++
		}
	}
	return n
}

func TestRedeliveredInputAppliedOnce(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		f := newFixture(t, k)
		r := f.runner(t)
		in := f.input(t, "OrderPlaced", "o1")
		for range 3 {
			if err := r.Handle(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		if n := f.count(t, r.Stream("o1"), TypeInbox); n != 1 {
			t.Fatalf("inbox records = %d, want 1", n)
		}
		inst, err := r.Load(ctx, "o1")
		if err != nil {
			t.Fatal(err)
		}
		if inst.State.Status != "placed" || len(inst.Unsent) != 1 || len(inst.Pending) != 1 {
			t.Fatalf("instance = %+v", inst)
		}
	})
}

func TestCrashBetweenAppendAndSend(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		f := newFixture(t, k)
		f.recv.failAt = 1 // the first send is delivered, then the relay "dies"
		if err := f.runner(t).Handle(ctx, f.input(t, "OrderPlaced", "o1")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.runner(t).Relay(ctx, "o1"); err == nil {
			t.Fatal("first relay: want the kill error")
		}
		r := f.runner(t) // restart
		if n, err := r.Relay(ctx, "o1"); err != nil || n != 1 {
			t.Fatalf("relay after restart = %d, %v", n, err)
		}
		if n, err := r.Relay(ctx, "o1"); err != nil || n != 0 {
			t.Fatalf("relay again = %d, %v; want 0", n, err)
		}
		if f.recv.sends != 2 || len(f.recv.got) != 1 {
			t.Fatalf("sends = %d, distinct ids = %d; want 2 sends of 1 id", f.recv.sends, len(f.recv.got))
		}
	})
}

func TestTimerFiresOnceWithCompetitors(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		f := newFixture(t, k)
		a, b := f.runner(t), f.runner(t)
		if err := a.Handle(ctx, f.input(t, "OrderPlaced", "o1")); err != nil {
			t.Fatal(err)
		}
		stream := a.Stream("o1")
		through := f.last(t, stream)
		if n, err := a.FireDue(ctx, through); err != nil || n != 0 {
			t.Fatalf("fire before due = %d, %v", n, err)
		}
		f.clock.Add(11 * time.Minute)
		var wg sync.WaitGroup
		fired := make([]int, 2)
		errs := make([]error, 2)
		for i, r := range []*Runner[order]{a, b} {
			wg.Go(func() { fired[i], errs[i] = r.FireDue(ctx, through) })
		}
		wg.Wait()
		if errors.Join(errs...) != nil || fired[0]+fired[1] != 1 {
			t.Fatalf("fired = %v, errs = %v; want 1 in all", fired, errs)
		}
		if n := f.count(t, stream, TypeInbox); n != 2 {
			t.Fatalf("inbox records = %d, want 2 (order, timer)", n)
		}
		// Compensation on timeout: cancelled and a refund in the outbox.
		inst, err := a.Load(ctx, "o1")
		if err != nil {
			t.Fatal(err)
		}
		if inst.State.Status != "cancelled" || len(inst.Unsent) != 2 || inst.Unsent[1].Type != "Refund" {
			t.Fatalf("after timeout: %+v", inst)
		}
	})
}

func TestTimerPausedHolder(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		f := newFixture(t, k)
		a, b := f.runner(t), f.runner(t)
		if err := a.Handle(ctx, f.input(t, "OrderPlaced", "o1")); err != nil {
			t.Fatal(err)
		}
		through := f.last(t, a.Stream("o1"))
		f.clock.Add(11 * time.Minute)
		paused, resume := make(chan struct{}), make(chan struct{})
		var once sync.Once
		a.beforeAppend = func(context.Context, string, Input) {
			once.Do(func() { close(paused); <-resume })
		}
		var aFired int
		var aErr error
		done := make(chan struct{})
		go func() { defer close(done); aFired, aErr = a.FireDue(ctx, through) }()
		<-paused // a decided to fire and holds; b fires meanwhile
		if n, err := b.FireDue(ctx, through); err != nil || n != 1 {
			t.Fatalf("b fired = %d, %v", n, err)
		}
		close(resume)
		<-done
		if aErr != nil || aFired != 0 {
			t.Fatalf("paused holder fired = %d, %v; want 0", aFired, aErr)
		}
		if n := f.count(t, a.Stream("o1"), TypeInbox); n != 2 {
			t.Fatalf("inbox records = %d, want 2", n)
		}
	})
}

func TestCancelledTimerDoesNotFire(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		f := newFixture(t, k)
		r := f.runner(t)
		for _, typ := range []string{"OrderPlaced", "PaymentTaken"} {
			if err := r.Handle(ctx, f.input(t, typ, "o1")); err != nil {
				t.Fatal(err)
			}
		}
		f.clock.Add(time.Hour)
		if n, err := r.FireDue(ctx, f.last(t, r.Stream("o1"))); err != nil || n != 0 {
			t.Fatalf("fired = %d, %v; want 0", n, err)
		}
		inst, err := r.Load(ctx, "o1")
		if err != nil {
			t.Fatal(err)
		}
		if inst.State.Status != "paid" || len(inst.Pending) != 0 {
			t.Fatalf("instance = %+v", inst)
		}
	})
}

func TestInvalidDefinition(t *testing.T) {
	_, err := NewRunner(nil, Definition[order]{Name: "x"}, nil, nil)
	if !errors.Is(err, ErrInvalidDefinition) {
		t.Fatalf("err = %v", err)
	}
}

// A process that dies after Decide and before its append leaves nothing:
// the restarted runner applies the input once and emits its command once.
func TestCrashBetweenDecideAndAppend(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		f := newFixture(t, k)
		in := f.input(t, "OrderPlaced", "o1")
		dying := f.runner(t)
		ctx, kill := context.WithCancel(context.Background())
		dying.beforeAppend = func(context.Context, string, Input) { kill() }
		if err := dying.Handle(ctx, in); !errors.Is(err, context.Canceled) {
			t.Fatalf("dying runner: err = %v, want context.Canceled", err)
		}
		r := f.runner(t)
		for range 2 { // the subscription redelivers after restart
			if err := r.Handle(context.Background(), in); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := r.Relay(context.Background(), "o1"); err != nil || n != 1 {
			t.Fatalf("relay = %d, %v", n, err)
		}
		if n := f.count(t, r.Stream("o1"), TypeInbox); n != 1 || f.recv.sends != 1 {
			t.Fatalf("inbox records = %d, sends = %d; want 1, 1", n, f.recv.sends)
		}
	})
}
