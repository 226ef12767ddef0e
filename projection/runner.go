package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/backoff"
	"github.com/varve-go/varve/subscription"
)

// Policy says what a runner does with a poison event: one whose handling
// still fails after every retry.
type Policy uint8

const (
	// Stop stops the projection: Run returns an error wrapping ErrStopped
	// and the handler's error, and the state is Failed. The next Run tries
	// the event again. It is the default.
	Stop Policy = iota
	// Park appends the event to the projection's parked stream
	// ([ParkedStream]) with the error, then moves past it.
	Park
)

// State is what a runner is doing.
type State uint8

const (
	// Idle: Run was not called yet, or returned.
	Idle State = iota
	// CatchingUp: the runner reads events that were in the log when it
	// started.
	CatchingUp
	// Live: the runner has reached the head of the log and follows it.
	Live
	// Paused: Pause was called.
	Paused
	// Failed: Run returned an error.
	Failed
	// Rebuilding: the runner replays the log after a [Rebuild] request.
	Rebuilding
)

func (s State) String() string {
	return [...]string{"idle", "catching-up", "live", "paused", "failed", "rebuilding"}[s]
}

// MarshalText implements encoding.TextMarshaler.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Status is a snapshot of a runner.
type Status struct {
	Name    string
	Version int
	State   State
	// Position is the checkpoint: everything up to it is handled.
	Position varve.Position
	// Head is the last position of the log when it was last looked at.
	Head varve.Position
	// Lag is the number of events (of any stream) between Position and
	// Head, on backends whose positions count events (memory, SQLite,
	// NATS); -1 where they do not (PostgreSQL).
	Lag int64
	// LagTime is how long ago the first event after Position was
	// appended, when Head was last looked at (at most once a second while
	// catching up); 0 once Position reaches Head.
	LagTime time.Duration
	// Rate is the events handled per second over the last batches.
	Rate float64
	// Handled counts the events handled by this runner; Parked the events
	// it parked.
	Handled, Parked int64
	// LastError is the last handler or read error, "" when none.
	LastError string
}

// Defaults of a [Config].
const (
	DefaultAttempts   = 5
	DefaultMinBackoff = 10 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// Config tunes a [Runner]. The zero Config is usable.
type Config struct {
	// PageSize is the most events of one batch; default the store's.
	PageSize int
	// Attempts is how many times a failing batch, then each of its events,
	// is tried before the event counts as poison; default 5.
	Attempts int
	// MinBackoff and MaxBackoff bound the delay between attempts.
	MinBackoff, MaxBackoff time.Duration
	// Poison says what happens to a poison event.
	Poison Policy
	// Promote makes the projection's version current ([SetCurrent]) when
	// it first reaches the head of the log, unless that version or a later
	// one is current already: the switch-over of a rebuild.
	Promote bool
	// MinPoll and MaxPoll bound the polling of a live runner on backends
	// that cannot notify (see package subscription).
	MinPoll, MaxPoll time.Duration
	// LocalFilter reads every event of the log and filters in the process
	// instead of pushing the filter down to the backend's filtered reads.
	// It is slower for a sparse filter; tests use it as the reference.
	LocalFilter bool
	// Checkpoints keeps the checkpoints; nil means the store's own, or
	// process memory on a backend without them. A projection with a
	// CommitFunc needs the store's own.
	Checkpoints varve.CheckpointStore
	// Segments, when more than 1, makes the runner handle only the events
	// of the streams in segment Segment (0..Segments-1, by
	// subscription.SegmentOf), with a checkpoint and an origin of its own;
	// [Runner.RunSegmented] runs a runner per segment held. A segmented
	// runner does not promote (Promote is refused) and does not rebuild in
	// place (a rebuild request is recorded as its LastError): one Reset per
	// segment would empty the whole read model.
	Segment, Segments int
	// ControlPoll is how often the runner reads the projection's control
	// stream for the requests of [Pause], [Resume] and [Rebuild] (what
	// `varve projections` writes); default 1s, negative to ignore them.
	// A runner also records there a Run that failed, and its recovery.
	ControlPoll time.Duration
}

// DefaultControlPoll is the default of [Config.ControlPoll].
const DefaultControlPoll = time.Second

// Runner runs one version of a projection. Its methods are safe for
// concurrent use; Run runs at most once at a time.
type Runner struct {
	store *varve.Store
	p     Projection
	cfg   Config
	cps   varve.CheckpointStore
	retry backoff.Exponential

	mu     sync.Mutex
	st     Status
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

	// The runners of the segments this process holds (RunSegmented).
	segMu sync.Mutex
	segs  map[int]*Runner

	// Following the control stream; only Run's goroutine uses these.
	ctrlAt     time.Time
	extPaused  bool          // paused by the control stream
	rebuilt    varve.Version // the last rebuild request carried out
	rebuilding bool
	failed     bool // the control stream holds a failure of this version
}

// NewRunner returns a runner of p over store.
func NewRunner(store *varve.Store, p Projection, cfg Config) (*Runner, error) {
	if store == nil {
		return nil, fmt.Errorf("projection: nil store: %w", varve.ErrInvalidArgument)
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	if cfg.PageSize < 0 || cfg.Attempts < 0 || cfg.MinBackoff < 0 || cfg.MaxBackoff < 0 {
		return nil, fmt.Errorf("projection %q: %w: negative setting", p.Name, varve.ErrInvalidArgument)
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
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
	r := &Runner{store: store, p: p, cfg: cfg, cps: cps,
		retry: backoff.Exponential{Initial: cfg.MinBackoff, Max: cfg.MaxBackoff, Jitter: 0.5}}
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

// Status returns the runner's status.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
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

func (r *Runner) set(f func(*Status)) {
	r.mu.Lock()
	f(&r.st)
	r.mu.Unlock()
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
// returned, with the state Failed; Run may be called again.
func (r *Runner) Run(ctx context.Context) (err error) {
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
		// A lease lost to another holder (RunActive) is no failure of the
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
		Name:           r.checkpointName(),
		Segment:        r.cfg.Segment,
		Segments:       r.cfg.Segments,
		Categories:     r.p.Filter.Categories,
		EventTypes:     r.p.Filter.Types,
		StreamPrefixes: r.p.Filter.StreamPrefixes,
		PageSize:       r.cfg.PageSize,
		MinPoll:        r.cfg.MinPoll,
		MaxPoll:        r.cfg.MaxPoll,
		Checkpoints:    r.cps,
	}
	if r.cfg.LocalFilter {
		sc.Categories, sc.EventTypes, sc.StreamPrefixes = nil, nil, nil
	}
	sub, err := subscription.Open(ctx, r.store, sc)
	if err != nil {
		return fmt.Errorf("projection %q: %w", r.p.Name, err)
	}
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

func (r *Runner) catchingUp() State {
	if r.rebuilding {
		return Rebuilding
	}
	return CatchingUp
}

// followControl reads the control stream, at most once a ControlPoll
// unless now, and follows its requests: pause, resume, rebuild.
func (r *Runner) followControl(ctx context.Context, now bool) error {
	if r.cfg.ControlPoll < 0 || !now && time.Since(r.ctrlAt) < r.cfg.ControlPoll {
		return nil
	}
	r.ctrlAt = time.Now()
	c, err := ReadControl(ctx, r.store, r.p.Name)
	if err != nil {
		return err
	}
	r.failed = c.Failure != nil && c.Failure.Version == r.p.Version
	switch {
	case c.Paused && !r.extPaused:
		r.extPaused = true
		r.Pause()
	case !c.Paused && r.extPaused:
		r.extPaused = false
		r.Resume()
	}
	req, ok := c.Rebuilds[r.p.Version]
	if !ok || req <= r.rebuilt {
		return nil
	}
	done, _, err := r.cps.LoadCheckpoint(ctx, rebuiltName(r.p.Name, r.p.Version))
	if err != nil {
		return fmt.Errorf("projection %q: %w", r.p.Name, err)
	}
	if r.rebuilt = varve.Version(done.Seq); req <= r.rebuilt {
		return nil
	}
	return r.rebuild(ctx, req)
}

// rebuild carries out rebuild request req: Reset, then the checkpoint
// back to the start and the origin at the head, then the record that req
// is done. A crash on the way leaves req undone, to be carried out again:
// Reset must be idempotent.
func (r *Runner) rebuild(ctx context.Context, req varve.Version) error {
	if r.cfg.Segments > 1 {
		r.rebuilt = req
		r.set(func(s *Status) {
			s.LastError = fmt.Sprintf("rebuild of version %d requested, but a segmented runner does not rebuild in place", r.p.Version)
		})
		return nil
	}
	if r.p.Reset == nil {
		r.rebuilt = req
		r.set(func(s *Status) {
			s.LastError = fmt.Sprintf("rebuild of version %d requested, but the projection has no Reset", r.p.Version)
		})
		return nil
	}
	r.rebuilding = true
	r.set(func(s *Status) { s.State = Rebuilding })
	if err := r.p.Reset(ctx, r.p.Version); err != nil {
		return fmt.Errorf("projection %q: rebuild: reset: %w", r.p.Name, err)
	}
	head, err := r.store.LastPosition(ctx)
	if err != nil {
		return fmt.Errorf("projection %q: rebuild: %w", r.p.Name, err)
	}
	for _, cp := range []struct {
		name string
		pos  varve.Position
	}{
		{CheckpointName(r.p.Name, r.p.Version), varve.Start},
		{originName(r.p.Name, r.p.Version), head},
		{rebuiltName(r.p.Name, r.p.Version), varve.Position{Seq: uint64(req)}},
	} {
		if err := r.cps.SaveCheckpoint(ctx, cp.name, cp.pos); err != nil {
			return fmt.Errorf("projection %q: rebuild: %w", r.p.Name, err)
		}
	}
	r.rebuilt = req
	r.set(func(s *Status) { s.Position, s.Lag = varve.Start, lag(varve.Start, s.Head) })
	return errRestart
}

// recordFailure appends the error that ended Run to the control stream.
func (r *Runner) recordFailure(ctx context.Context, cause error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := control(cctx, r.store, r.p.Name, failedType, controlRecord{Version: r.p.Version, Error: cause.Error()}); err == nil {
		r.failed = true
	}
}

func lag(pos, head varve.Position) int64 {
	if pos.Commit != 0 || head.Commit != 0 {
		return -1
	}
	if head.Seq <= pos.Seq {
		return 0
	}
	return int64(head.Seq - pos.Seq)
}

// handle handles one batch read from the subscription, split where it
// crosses the origin, so that Replaying is exact.
func (r *Runner) handle(ctx context.Context, b subscription.Batch, origin varve.Position) error {
	evs := b.Events
	if r.cfg.LocalFilter && !r.p.Filter.IsZero() {
		sep := r.store.Config().CategorySeparator
		evs = slices.DeleteFunc(evs, func(e varve.RecordedEvent) bool { return !r.p.Filter.Match(&e, sep) })
	}
	i := 0
	for i < len(evs) && !origin.Less(evs[i].Position) {
		i++
	}
	if i > 0 && i < len(evs) {
		if err := r.apply(ctx, Batch{Events: evs[:i], Through: evs[i-1].Position, Replaying: true}); err != nil {
			return err
		}
		evs, i = evs[i:], 0
	}
	replay := i == len(evs) && (len(evs) > 0 || !origin.Less(b.Through))
	return r.apply(ctx, Batch{Events: evs, Through: b.Through, Replaying: replay})
}

// apply handles a batch and moves the checkpoint to its end, retrying
// with back-off; a batch that keeps failing is handled event by event to
// find the poison one.
func (r *Runner) apply(ctx context.Context, b Batch) error {
	b.Version = r.p.Version
	if len(b.Events) == 0 && r.p.Commit == nil {
		if err := r.save(ctx, b.Through); err != nil {
			return err
		}
		r.done(b)
		return nil
	}
	err := r.attempts(ctx, b)
	if err == nil || len(b.Events) <= 1 {
		if err != nil && ctx.Err() == nil {
			return r.poison(ctx, b, err)
		}
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for i := range b.Events {
		one := Batch{Events: b.Events[i : i+1], Through: b.Events[i].Position, Replaying: b.Replaying, Version: b.Version}
		if i == len(b.Events)-1 {
			one.Through = b.Through
		}
		if err := r.apply(ctx, one); err != nil {
			return err
		}
	}
	return nil
}

// attempts tries b up to Attempts times; it returns the last error.
func (r *Runner) attempts(ctx context.Context, b Batch) error {
	var err error
	for n := 1; ; n++ {
		if err = r.once(ctx, b); err == nil || errors.Is(err, ErrApplied) {
			r.done(b)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.set(func(s *Status) { s.LastError = err.Error() })
		if n >= r.cfg.Attempts {
			return err
		}
		if serr := backoff.Sleep(ctx, r.retry.Delay(n)); serr != nil {
			return serr
		}
	}
}

// done records a handled batch in the status.
func (r *Runner) done(b Batch) {
	t := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Position = b.Through
	r.st.Lag = lag(b.Through, r.st.Head)
	if !b.Through.Less(r.st.Head) {
		r.st.LagTime = 0
	}
	r.st.Handled += int64(len(b.Events))
	r.rateN += int64(len(b.Events))
	if d := t.Sub(r.rateAt); r.rateAt.IsZero() || d >= time.Second {
		if !r.rateAt.IsZero() {
			r.st.Rate = float64(r.rateN) / d.Seconds()
		}
		r.rateAt, r.rateN = t, 0
	}
}

func (r *Runner) once(ctx context.Context, b Batch) error {
	name := r.checkpointName()
	if r.p.Commit != nil {
		return r.p.Commit(ctx, name, b)
	}
	if len(b.Events) > 0 {
		if err := r.p.Handle(ctx, b); err != nil {
			return err
		}
	}
	return r.save(ctx, b.Through)
}

// save saves the checkpoint of a handled batch, even when ctx has just
// ended.
func (r *Runner) save(ctx context.Context, pos varve.Position) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.cps.SaveCheckpoint(sctx, r.checkpointName(), pos); err != nil {
		return fmt.Errorf("projection %q: save checkpoint: %w", r.p.Name, err)
	}
	return nil
}

// Parked is the data of an event parked in a [ParkedStream].
type Parked struct {
	Version  int            `json:"version"`
	Stream   string         `json:"stream"`
	EventID  string         `json:"event_id"`
	Type     string         `json:"type"`
	Position varve.Position `json:"position"`
	Error    string         `json:"error"`
	// Data is the poison event's data.
	Data []byte `json:"data"`
}

// ParkedType is the type of the events of a parked stream. Each holds a
// [Parked] as JSON.
const ParkedType = "projection.parked"

func (r *Runner) poison(ctx context.Context, b Batch, cause error) error {
	e := b.Events[0]
	if r.cfg.Poison != Park {
		return fmt.Errorf("projection %q: %w: %s@%d (position %v): %w", r.p.Name, ErrStopped, e.Stream, e.Version, e.Position, cause)
	}
	data, _ := json.Marshal(Parked{Version: r.p.Version, Stream: e.Stream, EventID: e.ID.String(), Type: e.Type, Position: e.Position, Error: cause.Error(), Data: e.Data})
	ev := varve.NewEvent(ParkedType, data)
	if _, err := r.store.System().Append(ctx, ParkedStream(r.p.Name), varve.Any, ev); err != nil {
		return fmt.Errorf("projection %q: park %s@%d: %w (handler: %w)", r.p.Name, e.Stream, e.Version, err, cause)
	}
	// The parked event is passed over: the checkpoint moves past it (on
	// the transactional path, with an empty batch).
	skip := Batch{Through: b.Through, Replaying: b.Replaying, Version: b.Version}
	if err := r.attempts(ctx, skip); err != nil {
		return err
	}
	r.set(func(s *Status) { s.Parked++ })
	return nil
}
