package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/subscription"
)

// eventually retries cond until it holds, failing the test after a minute:
// the condition decides, not the time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runners runs r.Run in the background until the test stops it; stop waits
// for every Run to return and fails the test on an error.
type runners struct {
	t    *testing.T
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
	stop []context.CancelFunc
}

func (rs *runners) start(r *Runner[order], cfg RunConfig) {
	ctx, cancel := context.WithCancel(context.Background())
	rs.stop = append(rs.stop, cancel)
	rs.wg.Go(func() {
		if err := r.Run(ctx, cfg); err != nil {
			rs.mu.Lock()
			rs.errs = append(rs.errs, err)
			rs.mu.Unlock()
		}
	})
}

func (rs *runners) stopAll() {
	for _, c := range rs.stop {
		c()
	}
	rs.wg.Wait()
	for _, err := range rs.errs {
		rs.t.Errorf("run: %v", err)
	}
}

func newRunners(t *testing.T) *runners {
	rs := &runners{t: t}
	t.Cleanup(rs.stopAll)
	return rs
}

// TestRunSegments: two processes run a workflow split into 4 segments;
// every input is applied once, every payment timeout fires once, and every
// command reaches the receiver under one id.
func TestRunSegments(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		f := newFixture(t, k)
		rs := newRunners(t)
		const n = 12
		for i := range n {
			f.input(t, "OrderPlaced", fmt.Sprintf("o%d", i))
		}
		cfg := RunConfig{Filter: varve.Filter{Categories: []string{f.name + "src"}}, Tick: 20 * time.Millisecond,
			Lease: subscription.Lease{TTL: time.Second, Segments: 4}}
		for _, holder := range []string{"a", "b"} {
			cfg.Lease.Holder = holder
			rs.start(f.runner(t), cfg)
		}
		r := f.runner(t)
		status := func(want func(i int) string) func() bool {
			return func() bool {
				for i := range n {
					inst, err := r.Load(context.Background(), fmt.Sprintf("o%d", i))
					if err != nil {
						t.Fatal(err)
					}
					if inst.State.Status != want(i) || len(inst.Unsent) > 0 {
						return false
					}
				}
				return true
			}
		}
		eventually(t, "every order placed", status(func(int) string { return "placed" }))
		for i := 0; i < n; i += 2 {
			f.input(t, "PaymentTaken", fmt.Sprintf("o%d", i))
		}
		eventually(t, "the even orders paid", status(func(i int) string {
			return map[bool]string{true: "paid", false: "placed"}[i%2 == 0]
		}))
		f.clock.Add(11 * time.Minute)
		eventually(t, "the odd orders cancelled", status(func(i int) string {
			return map[bool]string{true: "paid", false: "cancelled"}[i%2 == 0]
		}))
		rs.stopAll()
		for i := range n {
			inst, err := r.Load(context.Background(), fmt.Sprintf("o%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if len(inst.Inputs) != 2 || len(inst.Pending) != 0 {
				t.Errorf("o%d: %d inputs, %d pending timers; want 2, 0", i, len(inst.Inputs), len(inst.Pending))
			}
		}
		f.recv.mu.Lock()
		defer f.recv.mu.Unlock()
		if len(f.recv.got) != 2*n {
			t.Errorf("%d distinct commands received, want %d", len(f.recv.got), 2*n)
		}
	})
}

// gate pauses a process's use of a store, as SIGSTOP would: while closed,
// every call of the backend (appends, reads, lease renewals, checkpoint
// saves) waits. Its data calls (appends and reads) and lease calls resume
// apart, and the appends made since the data calls resumed are recorded.
type gate struct {
	varve.Backend
	mu            sync.Mutex
	data, lease   chan struct{}
	recording     bool
	appendedSince []appended
}

type appended struct {
	stream string
	res    varve.AppendResult
	err    error
}

func newGate(b varve.Backend) *gate {
	g := &gate{Backend: b, data: make(chan struct{}), lease: make(chan struct{})}
	close(g.data)
	close(g.lease)
	return g
}

func (g *gate) pause() {
	g.mu.Lock()
	g.data, g.lease = make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) resumeData() {
	g.mu.Lock()
	g.recording = true
	closeOnce(g.data)
	g.mu.Unlock()
}

func (g *gate) resumeLeases() {
	g.mu.Lock()
	closeOnce(g.lease)
	g.mu.Unlock()
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

func (g *gate) appends() []appended {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]appended(nil), g.appendedSince...)
}

func (g *gate) wait(ctx context.Context) error {
	return g.waitOn(ctx, func() chan struct{} { return g.data })
}

func (g *gate) waitLease(ctx context.Context) error {
	return g.waitOn(ctx, func() chan struct{} { return g.lease })
}

func (g *gate) waitOn(ctx context.Context, ch func() chan struct{}) error {
	g.mu.Lock()
	c := ch()
	g.mu.Unlock()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) Unwrap() varve.Backend { return g.Backend }
func (g *gate) Close() error          { return nil } // the backend is shared

func (g *gate) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	if err := g.wait(ctx); err != nil {
		return varve.AppendResult{}, err
	}
	res, err := g.Backend.Append(ctx, req)
	g.mu.Lock()
	if g.recording {
		g.appendedSince = append(g.appendedSince, appended{req.Stream, res, err})
	}
	g.mu.Unlock()
	return res, err
}

func (g *gate) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	if err := g.wait(ctx); err != nil {
		return buf, err
	}
	return g.Backend.ReadStream(ctx, q, buf)
}

func (g *gate) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	if err := g.wait(ctx); err != nil {
		return buf, err
	}
	return g.Backend.ReadAll(ctx, q, buf)
}

func (g *gate) leases() varve.LeaseStore { l, _ := varve.As[varve.LeaseStore](g.Backend); return l }

func (g *gate) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (varve.Lease, error) {
	if err := g.waitLease(ctx); err != nil {
		return varve.Lease{}, err
	}
	return g.leases().AcquireLease(ctx, name, holder, ttl)
}

func (g *gate) ReleaseLease(ctx context.Context, name, holder string, token uint64) error {
	if err := g.waitLease(ctx); err != nil {
		return err
	}
	return g.leases().ReleaseLease(ctx, name, holder, token)
}

func (g *gate) SaveCheckpointFenced(ctx context.Context, name string, pos varve.Position, lease string, token uint64) error {
	if err := g.waitLease(ctx); err != nil {
		return err
	}
	return g.leases().SaveCheckpointFenced(ctx, name, pos, lease, token)
}

func (g *gate) ListLeases(ctx context.Context, prefix string) ([]varve.Lease, error) {
	if err := g.waitLease(ctx); err != nil {
		return nil, err
	}
	return g.leases().ListLeases(ctx, prefix)
}

// TestRunTimerHolderPausedPastLease: the process holding a workflow's
// lease decides a due timer and is paused before its append, past its
// lease; another process takes the lease and fires the timer; when the
// first resumes, its late append is refused: the timer fired once, and the
// compensation was sent under one id.
func TestRunTimerHolderPausedPastLease(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		f := newFixture(t, k)
		rs := newRunners(t)
		g := newGate(f.store.Backend())
		t.Cleanup(func() { g.resumeData(); g.resumeLeases() }) // before rs stops the runs
		paused, err := varve.New(g, varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := NewRunner(paused, orderDef(f.name), f.recv, f.clock)
		if err != nil {
			t.Fatal(err)
		}
		hooked, resume := make(chan struct{}), make(chan struct{})
		var once sync.Once
		a.beforeAppend = func(_ context.Context, _ string, in Input) {
			if in.Timer == "" {
				return
			}
			once.Do(func() {
				g.pause()
				close(hooked)
				<-resume
				g.resumeData()
			})
		}
		cfg := RunConfig{Filter: varve.Filter{Categories: []string{f.name + "src"}}, Tick: 20 * time.Millisecond,
			Lease: subscription.Lease{Holder: "a", TTL: time.Second}}
		rs.start(a, cfg)
		f.input(t, "OrderPlaced", "o1")
		observer := f.runner(t)
		eventually(t, "the order placed", func() bool {
			inst, err := observer.Load(ctx, "o1")
			return err == nil && inst.State.Status == "placed" && len(inst.Unsent) == 0
		})
		f.clock.Add(11 * time.Minute)
		<-hooked // a decided the timer and is paused before its append
		cfg.Lease.Holder = "b"
		rs.start(f.runner(t), cfg)
		eventually(t, "b to fire the timer", func() bool {
			inst, err := observer.Load(ctx, "o1")
			return err == nil && inst.State.Status == "cancelled" && len(inst.Unsent) == 0
		})
		// a resumes with its lease calls still paused, so that its late
		// append is made before it learns it lost the lease.
		close(resume)
		eventually(t, "a's late append", func() bool { return len(g.appends()) > 0 })
		late := g.appends()[0]
		if late.stream != a.Stream("o1") {
			t.Fatalf("a's first append after the pause went to %s", late.stream)
		}
		fired := varve.Version(0) // b's inbox record of the timer
		for e, err := range f.store.ReadStream(ctx, a.Stream("o1"), varve.From(2)) {
			if err != nil {
				t.Fatal(err)
			}
			if e.Type == TypeInbox {
				fired = e.Version
				break
			}
		}
		if late.err == nil && late.res.FirstVersion != fired || late.err != nil && !errors.Is(late.err, varve.ErrWrongExpectedVersion) {
			t.Fatalf("a's late append: %+v; want b's firing at version %d returned, or a conflict", late, fired)
		}
		t.Logf("a's late append: %+v", late)
		g.resumeLeases()
		eventually(t, "a to lose its lease", func() bool {
			ls, err := f.store.Leases().List(ctx, subscription.LeasePrefix)
			return err == nil && len(ls) == 1 && ls[0].Holder == "b"
		})
		rs.stopAll()
		if n := f.count(t, a.Stream("o1"), TypeInbox); n != 2 {
			t.Fatalf("%d inbox records, want 2 (the order, the timer once)", n)
		}
		f.recv.mu.Lock()
		defer f.recv.mu.Unlock()
		if len(f.recv.got) != 2 {
			t.Fatalf("%d distinct commands, want 2 (TakePayment, Refund)", len(f.recv.got))
		}
	})
}

// downSender fails every send while down, else passes it to recv.
type downSender struct {
	recv *receiver
	down atomic.Bool
}

func (s *downSender) Send(ctx context.Context, c Command) error {
	if s.down.Load() {
		return errors.New("receiver down")
	}
	return s.recv.Send(ctx, c)
}

// TestRunUnsentBeyondBudget: while the receiver is down, more instances
// have unsent commands than the budget lets Run hold; once it is up, every
// command is sent.
func TestRunUnsentBeyondBudget(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		f := newFixture(t, k)
		rs := newRunners(t)
		sender := &downSender{recv: f.recv}
		sender.down.Store(true)
		r, err := NewRunnerConfig(f.store, orderDef(f.name), sender, Config{Clock: f.clock, TimerIndexCount: 2})
		if err != nil {
			t.Fatal(err)
		}
		var failures atomic.Int64
		rs.start(r, RunConfig{Filter: varve.Filter{Categories: []string{f.name + "src"}}, Tick: 20 * time.Millisecond,
			OnError: func(error) { failures.Add(1) }})
		const n = 7
		for i := range n {
			f.input(t, "OrderPlaced", fmt.Sprintf("o%d", i))
		}
		observer := f.runner(t)
		eventually(t, "every order placed and sends failing", func() bool {
			for i := range n {
				inst, err := observer.Load(context.Background(), fmt.Sprintf("o%d", i))
				if err != nil || inst.State.Status != "placed" {
					return false
				}
			}
			return failures.Load() > n
		})
		sender.down.Store(false)
		eventually(t, "every command sent", func() bool {
			for i := range n {
				inst, err := observer.Load(context.Background(), fmt.Sprintf("o%d", i))
				if err != nil || len(inst.Unsent) > 0 {
					return false
				}
			}
			return true
		})
		f.recv.mu.Lock()
		defer f.recv.mu.Unlock()
		if len(f.recv.got) != n {
			t.Fatalf("%d distinct commands, want %d", len(f.recv.got), n)
		}
	})
}

// TestRunStoreErrorAfterInstanceError: in one tick a timer whose Decide
// fails and then a timer whose append the store keeps refusing; the store
// error ends Run (with the instance's error joined to it), and OnError,
// which hears the errors Run goes past, does not hear it.
func TestRunStoreErrorAfterInstanceError(t *testing.T) {
	f := newFixture(t, teststore.Kinds[0])
	def := orderDef(f.name)
	route, decide := def.Route, def.Decide
	def.Route = func(e *varve.RecordedEvent) (string, bool) {
		if e.Type == "BadPlaced" {
			return string(e.Data), true
		}
		return route(e)
	}
	def.Decide = func(s order, in Input) (Decision, error) {
		switch {
		case in.Type == "BadPlaced":
			return Decision{Events: []varve.Event{{Type: "bad"}}, Timers: []Timer{{ID: "payment", Due: t0.Add(5 * time.Minute)}}}, nil
		case in.Timer == "payment" && s.Status == "bad":
			return Decision{}, errors.New("no decision for a bad order")
		}
		return decide(s, in)
	}
	r, err := NewRunner(f.store, def, f.recv, f.clock)
	if err != nil {
		t.Fatal(err)
	}
	good := r.Stream("good")
	// Another writer appends to the good instance before each of the
	// timer's appends: every attempt meets a wrong expected version.
	r.beforeAppend = func(ctx context.Context, stream string, in Input) {
		if stream == good && in.Timer == "payment" {
			if _, err := f.store.Append(ctx, stream, varve.Any, varve.Event{Type: "placed"}); err != nil {
				t.Error(err)
			}
		}
	}
	var heard []error
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, RunConfig{Filter: varve.Filter{Categories: []string{f.name + "src"}}, Tick: 20 * time.Millisecond,
			OnError: func(err error) { mu.Lock(); heard = append(heard, err); mu.Unlock() }})
	}()
	f.input(t, "BadPlaced", "bad")
	f.input(t, "OrderPlaced", "good")
	observer := f.runner(t)
	eventually(t, "both orders placed", func() bool {
		b, err1 := observer.Load(context.Background(), "bad")
		g, err2 := observer.Load(context.Background(), "good")
		return err1 == nil && err2 == nil && len(b.Pending) == 1 && len(g.Pending) == 1
	})
	f.clock.Add(11 * time.Minute)
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cancel()
		<-done
		t.Fatal("Run went on past a store error")
	}
	if !errors.Is(err, varve.ErrWrongExpectedVersion) || !strings.Contains(err.Error(), "no decision for a bad order") {
		t.Fatalf("Run returned %v; want the store's error joined with the instance's", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range heard {
		if errors.Is(e, varve.ErrWrongExpectedVersion) {
			t.Errorf("OnError heard the store error: %v", e)
		}
	}
}
