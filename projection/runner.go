package projection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/notify"
	"github.com/varve-go/varve/shred"
	"github.com/varve-go/varve/subscription"
)

// Runner runs one version of a projection. Its methods are safe for
// concurrent use; Run runs at most once at a time.
type Runner struct {
	store *varve.Store
	p     Projection
	cfg   Config
	cps   varve.CheckpointStore

	mu     sync.Mutex
	st     Status
	moved  notify.Broadcast // st changed: wakes WaitFor
	paused bool
	resume chan struct{}
	// wake ends the wait of a live runner for new events, so that Pause
	// takes effect at once.
	wake    context.CancelFunc
	running bool
	rateAt  time.Time
	rateN   int64

	live     chan struct{}
	liveOnce sync.Once

	// The runners of the segments this process holds (a segmented run under a lease).
	segMu sync.Mutex
	segs  map[int]*Runner

	// Following the control stream; only Run's goroutine uses these.
	ctrlAt     time.Time
	extPaused  bool          // paused by the control stream
	rebuilt    varve.Version // the last rebuild request carried out
	rebuilding bool
	replayed   varve.Version // the last replay request carried out
	failed     bool          // the control stream holds a failure of this version
}

// NewRunner returns a runner of p over store.
func NewRunner(store *varve.Store, p Projection, cfg Config) (*Runner, error) {
	if store == nil {
		return nil, fmt.Errorf("projection: nil store: %w", varve.ErrInvalidArgument)
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	if cfg.PageSize < 0 {
		return nil, fmt.Errorf("projection %q: %w: negative page size", p.Name, varve.ErrInvalidArgument)
	}
	retry, err := cfg.Retry.WithDefaults(subscription.RetryPolicy{MaxAttempts: DefaultMaxAttempts,
		InitialBackoff: DefaultInitialBackoff, MaxBackoff: DefaultMaxBackoff, Jitter: DefaultJitter})
	if err != nil {
		return nil, fmt.Errorf("projection %q: %w", p.Name, err)
	}
	cfg.Retry = retry
	if cfg.Lease, err = cfg.Lease.WithDefaults(); err != nil {
		return nil, fmt.Errorf("projection %q: %w", p.Name, err)
	}
	if cfg.Lease.Holder != "" && cfg.Checkpoints != nil {
		return nil, fmt.Errorf("projection %q: %w: a run under a lease fences the store's checkpoints, Config.Checkpoints must be nil", p.Name, varve.ErrNotSupported)
	}
	if cfg.Lease.Segments > 1 && (cfg.Promote || cfg.Segments > 1) {
		return nil, fmt.Errorf("projection %q: %w: a segmented version neither promotes nor has Config.Segments of its own", p.Name, varve.ErrInvalidArgument)
	}
	if cfg.Lease.Holder != "" && (!store.Capabilities().Leases || !store.Capabilities().Checkpoints) {
		return nil, fmt.Errorf("projection %q: a run under a lease needs the store's leases and checkpoints: %w", p.Name, varve.ErrNotSupported)
	}
	if cfg.ControlPoll == 0 {
		cfg.ControlPoll = DefaultControlPoll
	}
	if cfg.Segments > 1 && (cfg.Segments > subscription.MaxSegments || cfg.Segment < 0 || cfg.Segment >= cfg.Segments || cfg.Promote) {
		return nil, fmt.Errorf("projection %q: %w: segment %d of %d (at most %d, without Promote)", p.Name, varve.ErrInvalidArgument, cfg.Segment, cfg.Segments, subscription.MaxSegments)
	}
	cps := cfg.Checkpoints
	if cps == nil {
		if c := store.Checkpoints(); store.Capabilities().Checkpoints {
			cps = storeCheckpoints{c}
		} else if p.Commit != nil {
			return nil, fmt.Errorf("projection %q: %w: a CommitFunc needs the store's checkpoints", p.Name, varve.ErrNotSupported)
		} else {
			cps = subscription.NewMemoryCheckpoints()
		}
	}
	r := &Runner{store: store, p: p, cfg: cfg, cps: cps}
	r.st = Status{Name: p.Name, Version: p.Version, Lag: -1}
	r.live = make(chan struct{})
	return r, nil
}

type storeCheckpoints struct{ c varve.Checkpoints }

func (s storeCheckpoints) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	return s.c.Save(ctx, name, pos)
}

func (s storeCheckpoints) LoadCheckpoint(ctx context.Context, name string) (varve.Position, bool, error) {
	return s.c.Load(ctx, name)
}

// Live returns a channel closed when the runner first reaches the head of
// the log: every event committed before it started is handled.
func (r *Runner) Live() <-chan struct{} { return r.live }

// Pause makes Run stop handling after the batch in hand, until Resume.
func (r *Runner) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.paused {
		r.paused, r.resume = true, make(chan struct{})
		if r.wake != nil {
			r.wake()
		}
	}
}

// Resume undoes Pause.
func (r *Runner) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		r.paused = false
		close(r.resume)
	}
}

// origin returns the head of the log when this version first started:
// the events up to it are a replay. It is saved beside the checkpoint.
func (r *Runner) origin(ctx context.Context) (varve.Position, error) {
	name := r.checkpointName() + "-origin"
	pos, ok, err := r.cps.LoadCheckpoint(ctx, name)
	if err != nil || ok {
		return pos, err
	}
	if pos, err = r.store.LastPosition(ctx); err != nil {
		return pos, err
	}
	return pos, r.cps.SaveCheckpoint(ctx, name, pos)
}

// Run runs the projection until ctx ends (it then returns nil) or a poison
// event stops it. A read error or a failure to save the checkpoint is
// returned, with the state Failed; Run may be called again. With
// Config.Lease naming a holder, Run runs the version across processes
// under leases: single-active, or segmented (see [Config.Lease]).
func (r *Runner) Run(ctx context.Context) error {
	switch {
	case r.cfg.Lease.Holder == "":
		return r.runHere(ctx)
	case r.cfg.Lease.Segments > 1:
		return r.runSegmented(ctx)
	}
	return r.runActive(ctx)
}

// runHere runs the projection here, holding no lease.
func (r *Runner) runHere(ctx context.Context) (err error) {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return fmt.Errorf("projection %q: %w: already running", r.p.Name, varve.ErrInvalidArgument)
	}
	r.running = true
	r.mu.Unlock()
	defer func() {
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			err = nil
		}
		r.set(func(s *Status) {
			s.State = Idle
			if err != nil && !errors.Is(err, varve.ErrLeaseLost) {
				s.State, s.LastError = Failed, err.Error()
			}
		})
		// A lease lost to another holder (a run under a lease) is no failure of the
		// projection.
		if err != nil && r.cfg.ControlPoll >= 0 && !errors.Is(err, varve.ErrLeaseLost) {
			r.recordFailure(ctx, err)
		}
		r.mu.Lock()
		r.running = false
		r.mu.Unlock()
	}()
	for {
		err := r.run(ctx)
		if !errors.Is(err, errRestart) {
			return err
		}
	}
}

// errRestart makes Run open the subscription again, after a rebuild.
var errRestart = errors.New("projection: restart")

func (r *Runner) run(ctx context.Context) error {
	if err := r.followControl(ctx, true); err != nil {
		return err
	}
	origin, err := r.origin(ctx)
	if err != nil {
		return fmt.Errorf("projection %q: origin: %w", r.p.Name, err)
	}
	sc := subscription.Config{
		Name:        r.checkpointName(),
		Segment:     r.cfg.Segment,
		Segments:    r.cfg.Segments,
		Filter:      r.p.Filter,
		Query:       r.p.Query,
		PageSize:    r.cfg.PageSize,
		MinPoll:     r.cfg.MinPoll,
		MaxPoll:     r.cfg.MaxPoll,
		Heartbeat:   r.cfg.Heartbeat,
		Checkpoints: r.cps,
	}
	if r.cfg.LocalFilter {
		sc.Filter = varve.Filter{}
	}
	if r.p.Erasures {
		sc.SystemStreams = true
		sc.Filter = withErasures(sc.Filter, r.store.Category(shred.ErasureStream))
	}
	sub, err := subscription.Open(ctx, r.store, sc)
	if err != nil {
		return fmt.Errorf("projection %q: %w", r.p.Name, err)
	}
	defer sub.Heartbeat(ctx)()
	start, _ := sub.StartPosition()
	r.set(func(s *Status) { s.Position, s.State = start, r.catchingUp() })
	// The head is looked at again when the runner reaches the last one
	// seen, and at most once a second for the lag otherwise: not once per
	// batch. The runner is live when it is still at the head then, or when
	// it reaches a head seen after it had reached an earlier one: under a
	// steady stream of appends the head seen anew is always a little
	// further on, and a runner that waited for that would never switch
	// over; a head seen at the start may be stale (PostgreSQL's horizon).
	live, reached := false, false
	var head varve.Position
	var headAt time.Time
	sample := func() error {
		h, err := r.store.LastPosition(ctx)
		if err != nil {
			return fmt.Errorf("projection %q: %w", r.p.Name, err)
		}
		head, headAt = h, time.Now()
		r.mu.Lock()
		pos := r.st.Position
		r.mu.Unlock()
		var age time.Duration
		if pos.Less(h) {
			page, err := r.store.ReadAllPage(ctx, pos, nil, varve.PageSize(1))
			if err != nil {
				return fmt.Errorf("projection %q: %w", r.p.Name, err)
			}
			if len(page.Events) > 0 {
				age = max(time.Since(page.Events[0].RecordedAt), 0)
			}
		}
		r.set(func(s *Status) { s.Head, s.Lag, s.LagTime = h, lag(s.Position, h), age })
		return nil
	}
	if err := sample(); err != nil {
		return err
	}
	for {
		if err := r.followControl(ctx, false); err != nil {
			return err
		}
		if err := r.waitResumed(ctx, live); err != nil {
			return err
		}
		switch {
		case !live && !sub.Position().Less(head):
			if err := sample(); err != nil {
				return err
			}
			if reached || !sub.Position().Less(head) {
				if err := r.goLive(ctx); err != nil {
					return err
				}
				live = true
			}
			reached = true
		case time.Since(headAt) >= time.Second:
			if err := sample(); err != nil {
				return err
			}
		}
		nctx, wake := context.WithCancel(ctx)
		if r.cfg.ControlPoll > 0 && live {
			// A live runner waiting for events looks at the control
			// stream all the same. (Not while catching up: a slow read
			// must not be cut short again and again; the loop comes
			// back here after each batch anyway.)
			nctx, wake = context.WithTimeout(ctx, r.cfg.ControlPoll)
		}
		r.mu.Lock()
		r.wake = wake
		if r.paused {
			wake()
		}
		r.mu.Unlock()
		b, err := sub.Next(nctx)
		wake()
		if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			if ctx.Err() != nil {
				// Stopped, maybe just as the wait's own deadline
				// passed: Run reports a stop, not that deadline.
				return ctx.Err()
			}
			continue // paused while waiting, or time to look at the control stream
		}
		if err != nil {
			return err
		}
		if err := r.handle(ctx, b, origin); err != nil {
			return err
		}
	}
}

// goLive records that the runner reached the head of the log, and makes
// its version current under Config.Promote.
func (r *Runner) goLive(ctx context.Context) error {
	if r.failed {
		if err := control(ctx, r.store, r.p.Name, recoveredType, controlRecord{Version: r.p.Version}); err != nil {
			return err
		}
		r.failed = false
	}
	r.rebuilding = false
	r.set(func(s *Status) { s.State = Live })
	r.liveOnce.Do(func() { close(r.live) })
	if !r.cfg.Promote {
		return nil
	}
	return r.promote(ctx)
}

func (r *Runner) promote(ctx context.Context) error {
	cur, ok, err := Current(ctx, r.store, r.p.Name)
	if err != nil || (ok && cur >= r.p.Version) {
		return err
	}
	return SetCurrent(ctx, r.store, r.p.Name, r.p.Version)
}

func (r *Runner) waitResumed(ctx context.Context, live bool) error {
	r.mu.Lock()
	paused, resume := r.paused, r.resume
	if paused {
		r.st.State = Paused
	}
	r.mu.Unlock()
	if !paused {
		return nil
	}
	var tick <-chan time.Time
	if r.cfg.ControlPoll > 0 {
		t := time.NewTicker(r.cfg.ControlPoll)
		defer t.Stop()
		tick = t.C
	}
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-resume:
			waiting = false
		case <-tick:
			if err := r.followControl(ctx, true); err != nil {
				return err
			}
		}
	}
	r.set(func(s *Status) {
		s.State = r.catchingUp()
		if live {
			s.State = Live
		}
	})
	return nil
}

func (r *Runner) isPaused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paused
}

func (r *Runner) catchingUp() State {
	if r.rebuilding {
		return Rebuilding
	}
	return CatchingUp
}
