package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/backoff"
	"github.com/varve-go/varve/internal/notify"
	"github.com/varve-go/varve/subscription"
)

// Ordering is the order in which a dispatcher delivers events.
type Ordering uint8

const (
	// PerStream delivers the events of a stream in version order, at most
	// one at a time; events of different streams run concurrently.
	PerStream Ordering = iota
	// Unordered delivers any event as soon as a worker is free.
	Unordered
)

func (o Ordering) String() string {
	switch o {
	case PerStream:
		return "per-stream"
	case Unordered:
		return "none"
	}
	return fmt.Sprintf("Ordering(%d)", uint8(o))
}

// ParseOrdering parses "per-stream" or "none".
func ParseOrdering(s string) (Ordering, error) {
	switch s {
	case "per-stream", "stream":
		return PerStream, nil
	case "none", "unordered":
		return Unordered, nil
	}
	return 0, fmt.Errorf("delivery: ordering %q: want per-stream or none: %w", s, varve.ErrInvalidArgument)
}

// RetryPolicy says how often and how long a failing event is retried
// before it is parked. The zero value gives the defaults.
type RetryPolicy struct {
	// MaxAttempts parks an event after this many failed attempts; default
	// 10, negative for no limit (then set MaxAge).
	MaxAttempts int
	// MaxAge parks an event whose next attempt would start later than this
	// after its first; 0 for no limit.
	MaxAge time.Duration
	// InitialBackoff is the delay before the second attempt; each later
	// delay doubles, up to MaxBackoff. Defaults 100ms and 30s.
	InitialBackoff, MaxBackoff time.Duration
	// Jitter takes a random fraction of up to Jitter off each delay, so that
	// retries of many events spread out; default 0.2, negative for none.
	Jitter float64
}

// Defaults of a [Config].
const (
	DefaultConcurrency        = 16
	DefaultMaxAttempts        = 10
	DefaultInitialBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff         = 30 * time.Second
	DefaultJitter             = 0.2
	DefaultAttemptTimeout     = 30 * time.Second
	DefaultCheckpointInterval = time.Second
	DefaultParkedPollInterval = 5 * time.Second
	DefaultDrainTimeout       = 10 * time.Second
	// DefaultWindowPerWorker sizes the default window: 64 pending events
	// per worker, at least 1,024.
	DefaultWindowPerWorker = 64
)

// Timeouts and back-offs that are not configuration.
const (
	// finalSaveTimeout bounds the save of the checkpoint when Run returns,
	// which runs after Run's context ended.
	finalSaveTimeout = 10 * time.Second
	// minSaveTimeout is the least time a periodic checkpoint save gets; it
	// gets CheckpointInterval when that is longer.
	minSaveTimeout = 5 * time.Second
)

// readBackoff spaces the reads of the subscription after a failed one
// (one that Run does not give up on: not a closed store).
var readBackoff = backoff.Exponential{Initial: 10 * time.Millisecond, Max: 5 * time.Second}

// Config configures a [Dispatcher]. The zero value gives the defaults.
type Config struct {
	// Concurrency is the number of deliveries that may run at once (C).
	Concurrency int
	// Ordering is PerStream (default) or Unordered.
	Ordering Ordering
	// Window bounds the events read but not yet delivered or parked; the
	// reader waits while it is full (it may overshoot by one page). Default
	// 64 per worker, at least 1,024. Delivered events cost nothing, however
	// far the checkpoint lags behind them.
	Window int
	// Retry is the retry policy.
	Retry RetryPolicy
	// AttemptTimeout bounds one delivery attempt; default 30s, negative
	// for none. A watchdog enforces it, to within an eighth of it (at most
	// a second), so that attempts need no timer of their own; sinks such as
	// the webhook have their own, precise timeouts.
	AttemptTimeout time.Duration
	// CheckpointInterval is how often the checkpoint is saved when it moved;
	// default 1s. It is also saved when Run returns.
	CheckpointInterval time.Duration
	// ParkedPollInterval is how often the parked store is read to learn
	// that parked events were replayed or skipped, so that their streams
	// flow again; default 5s.
	ParkedPollInterval time.Duration
	// DrainTimeout bounds how long Run waits, once its context ends, for
	// the deliveries in flight; then their contexts are cancelled, and Run
	// waits for the sinks to return. Default 10s.
	DrainTimeout time.Duration
	// Parked keeps the parked events; default NewParked on the
	// subscription's store and name. A [Source] whose events are in no
	// varve store (NewFromSource) requires it: its parked records then keep
	// the whole event, so that a replay needs nothing from the source.
	Parked *Parked
	// Logger logs parked events and failures; default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Concurrency < 0 || c.Window < 0 || c.CheckpointInterval < 0 || c.ParkedPollInterval < 0 ||
		c.DrainTimeout < 0 || c.Retry.InitialBackoff < 0 || c.Retry.MaxBackoff < 0 || c.Retry.MaxAge < 0 || c.Retry.Jitter > 1 {
		return c, fmt.Errorf("delivery: config: %w: negative value or jitter above 1", varve.ErrInvalidArgument)
	}
	if c.Ordering > Unordered {
		return c, fmt.Errorf("delivery: config: %w: ordering %v", varve.ErrInvalidArgument, c.Ordering)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Window == 0 {
		c.Window = max(1024, DefaultWindowPerWorker*c.Concurrency)
	}
	r := &c.Retry
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.MaxAttempts < 0 && r.MaxAge == 0 {
		return c, fmt.Errorf("delivery: config: %w: no limit on attempts nor age", varve.ErrInvalidArgument)
	}
	if r.InitialBackoff == 0 {
		r.InitialBackoff = DefaultInitialBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = DefaultMaxBackoff
	}
	r.MaxBackoff = max(r.MaxBackoff, r.InitialBackoff)
	if r.Jitter == 0 {
		r.Jitter = DefaultJitter
	}
	r.Jitter = max(r.Jitter, 0)
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.ParkedPollInterval == 0 {
		c.ParkedPollInterval = DefaultParkedPollInterval
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// backoff returns the delay after the attempt-th failed attempt.
func (r RetryPolicy) backoff(attempt int) time.Duration {
	return backoff.Exponential{Initial: r.InitialBackoff, Max: r.MaxBackoff, Jitter: r.Jitter}.Delay(attempt)
}

// Stats are a dispatcher's counters.
type Stats struct {
	// Read counts the events read that passed the subscription's filters.
	Read uint64
	// Delivered counts events the sink took; Parked those given up on.
	Delivered, Parked uint64
	// Attempts counts delivery attempts; Retries the failed ones that were
	// scheduled again.
	Attempts, Retries uint64
	// InFlight is the number of attempts running; Pending the events read
	// and not yet delivered or parked (the window in use).
	InFlight, Pending int
	// ParkedStreams counts the streams held back by a parked event
	// (PerStream mode).
	ParkedStreams int
	// Checkpoint is the end of the contiguous prefix of delivered or parked
	// events; Saved is the checkpoint last persisted.
	Checkpoint, Saved varve.Position
	// SavedAt is when Saved was persisted (or the dispatcher made, before
	// its first save).
	SavedAt time.Time
}

var errAttemptTimeout = errors.New("delivery: attempt timed out")

// ErrStopped is returned by [Dispatcher.WaitFor] once Run has returned.
var ErrStopped = errors.New("delivery: dispatcher stopped")

// Dispatcher delivers the events of a subscription to a sink, many at once.
// See the package documentation for its model.
type Dispatcher struct {
	sub    Source
	sink   Sink
	cfg    Config
	parked *Parked
	log    *slog.Logger
	// keepEvents makes parked records carry the event: the source keeps
	// it in no store.
	keepEvents bool

	started atomic.Bool
	stopped chan struct{}

	read, delivered, parkedN, attempts, retries atomic.Uint64
	inFlight, pending, parkedStreams            atomic.Int64

	mu         sync.Mutex
	checkpoint varve.Position
	saved      varve.Position
	savedAt    time.Time
	advanced   notify.Broadcast // the checkpoint moved
}

// New returns a dispatcher of the subscription's events to sink. It starts
// nothing: call Run.
func New(sub *subscription.Subscription, sink Sink, cfg Config) (*Dispatcher, error) {
	if sub == nil {
		return nil, fmt.Errorf("delivery: new dispatcher: %w: nil subscription or sink", varve.ErrInvalidArgument)
	}
	return NewFromSource(sub, sink, cfg)
}

// NewFromSource returns a dispatcher of src's events to sink. When src
// keeps its events in a varve store (it has a method Store() *varve.Store
// that returns one, as a subscription does), the dispatcher behaves as New;
// otherwise cfg.Parked is required, and the records it parks hold the
// events themselves. It starts nothing: call Run.
func NewFromSource(src Source, sink Sink, cfg Config) (*Dispatcher, error) {
	if src == nil || sink == nil {
		return nil, fmt.Errorf("delivery: new dispatcher: %w: nil subscription or sink", varve.ErrInvalidArgument)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	store := sourceStore(src)
	d := &Dispatcher{sub: src, sink: sink, cfg: cfg, parked: cfg.Parked, log: cfg.Logger, stopped: make(chan struct{}), keepEvents: store == nil}
	if d.parked == nil {
		if store == nil {
			return nil, fmt.Errorf("delivery: new dispatcher of %q: %w: the source keeps no store, Config.Parked is required", src.Name(), varve.ErrInvalidArgument)
		}
		d.parked = NewParked(store, src.Name())
	}
	d.log = d.log.With("subscription", src.Name())
	d.checkpoint = src.Position()
	d.saved, d.savedAt = d.checkpoint, time.Now()
	return d, nil
}

// Parked returns the store of the dispatcher's parked events.
func (d *Dispatcher) Parked() *Parked { return d.parked }

// Stats returns the dispatcher's counters.
func (d *Dispatcher) Stats() Stats {
	d.mu.Lock()
	cp, saved, savedAt := d.checkpoint, d.saved, d.savedAt
	d.mu.Unlock()
	return Stats{
		Read: d.read.Load(), Delivered: d.delivered.Load(), Parked: d.parkedN.Load(),
		Attempts: d.attempts.Load(), Retries: d.retries.Load(),
		InFlight: int(d.inFlight.Load()), Pending: int(d.pending.Load()), ParkedStreams: int(d.parkedStreams.Load()),
		Checkpoint: cp, Saved: saved, SavedAt: savedAt,
	}
}

// WaitFor blocks until every event up to pos is delivered or parked (the
// checkpoint in memory reached pos), ctx ends, or Run returns.
func (d *Dispatcher) WaitFor(ctx context.Context, pos varve.Position) error {
	for {
		ch := d.advanced.Wait() // before the check, so that no move is missed
		d.mu.Lock()
		reached := !d.checkpoint.Less(pos)
		d.mu.Unlock()
		if reached {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-d.stopped:
			d.mu.Lock()
			reached := !d.checkpoint.Less(pos)
			d.mu.Unlock()
			if reached {
				return nil
			}
			return ErrStopped
		}
	}
}

func (d *Dispatcher) publish(cp varve.Position) {
	d.mu.Lock()
	d.checkpoint = cp
	d.mu.Unlock()
	d.advanced.Notify()
}

// flush saves the checkpoint if it moved since the last save.
func (d *Dispatcher) flush(ctx context.Context) error {
	d.mu.Lock()
	cp, saved := d.checkpoint, d.saved
	d.mu.Unlock()
	if cp == saved {
		return nil
	}
	if err := d.sub.SaveCheckpoint(ctx, cp); err != nil {
		return err
	}
	d.mu.Lock()
	d.saved, d.savedAt = cp, time.Now()
	d.mu.Unlock()
	return nil
}

type feedBatch struct {
	items   []*item
	through varve.Position
}

type result struct {
	it      *item
	err     error
	version varve.Version // of the parked stream, after a park
}

type unblock struct {
	stream  string
	version varve.Version // of the parked stream when it was seen resolved
}

// Run reads the subscription and delivers its events until ctx ends, then
// waits for the deliveries in flight (up to DrainTimeout), saves the
// checkpoint (for up to 10s) and returns nil. It returns an error when the subscription
// cannot be read any more (the store was closed, say), also after saving
// the checkpoint. Run may be called once.
func (d *Dispatcher) Run(ctx context.Context) error {
	if !d.started.CompareAndSwap(false, true) {
		return fmt.Errorf("delivery: %w: Run called twice", varve.ErrInvalidArgument)
	}
	defer close(d.stopped)
	c := &coordinator{d: d, streams: map[string]*streamQueue{}, lastRead: d.sub.Position(), published: d.sub.Position(),
		ready: newMinHeap(readyFirst), retries: newMinHeap(dueFirst)}
	parkedSt := newParkedState()
	if err := d.parked.load(ctx, parkedSt); err != nil {
		return fmt.Errorf("delivery: start: %w", err)
	}
	if d.cfg.Ordering == PerStream {
		for stream := range parkedSt.perStream {
			c.streams[stream] = &streamQueue{name: stream, blocked: true, parkedVersion: parkedSt.version}
		}
		d.parkedStreams.Store(int64(len(parkedSt.perStream)))
	}

	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	deliverCtx, stopDelivering := context.WithCancel(context.WithoutCancel(ctx))
	defer stopDelivering()
	ch := channels{
		feed:    make(chan feedBatch),
		readErr: make(chan error, 1),
		work:    make(chan job),
		results: make(chan result, d.cfg.Concurrency),
		unblock: make(chan unblock),
	}
	var workers sync.WaitGroup
	workers.Go(func() { d.reader(readCtx, ch.feed, ch.readErr) })
	ws := make([]*worker, d.cfg.Concurrency)
	for i := range ws {
		w := &worker{base: deliverCtx}
		ws[i] = w
		workers.Go(func() {
			for j := range ch.work {
				r := d.attempt(w.begin(), j)
				w.end()
				ch.results <- r
			}
		})
	}
	maintStop := make(chan struct{})
	var maint sync.WaitGroup
	maint.Go(func() { d.maintain(deliverCtx, parkedSt, ws, ch.unblock, maintStop) })

	err := c.loop(ctx, ch, stopReading, stopDelivering)

	stopReading()
	close(ch.work)
	workers.Wait()
	close(maintStop)
	maint.Wait()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSaveTimeout)
	defer cancel()
	if ferr := d.flush(fctx); ferr != nil {
		err = errors.Join(err, fmt.Errorf("delivery: final checkpoint: %w", ferr))
	}
	return err
}

// reader feeds the coordinator with the subscription's events.
func (d *Dispatcher) reader(ctx context.Context, feed chan<- feedBatch, readErr chan<- error) {
	var seq uint64
	prev := d.sub.Position()
	own := d.parked.Stream()
	failures := 0
	for {
		b, err := d.sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, varve.ErrClosed) || errors.Is(err, varve.ErrInvalidArgument) {
				readErr <- err
				return
			}
			failures++
			wait := readBackoff.Delay(failures)
			d.log.Warn("delivery: read failed, retrying", "err", err, "in", wait)
			if backoff.Sleep(ctx, wait) != nil {
				return
			}
			continue
		}
		failures = 0
		items := make([]*item, 0, len(b.Events))
		for i := range b.Events {
			if b.Events[i].Stream == own {
				prev = b.Events[i].Position
				continue // never deliver our own parked records (SystemStreams)
			}
			items = append(items, &item{ev: b.Events[i], seq: seq, prev: prev})
			seq++
			prev = b.Events[i].Position
		}
		prev = b.Through
		select {
		case feed <- feedBatch{items: items, through: b.Through}:
		case <-ctx.Done():
			return
		}
	}
}

// job is what a worker gets: an item, which the worker only reads, and the
// number of the attempt.
type job struct {
	it      *item
	attempt int
}

// attempt runs one job: a delivery or a park. It runs on a worker.
func (d *Dispatcher) attempt(ctx context.Context, j job) (r result) {
	it := j.it
	r.it = it
	defer func() {
		if p := recover(); p != nil {
			r.err = fmt.Errorf("delivery: sink panicked: %v\n%s", p, debug.Stack())
		}
	}()
	if it.park {
		r.version, r.err = d.parked.Park(ctx, it.record)
		return r
	}
	r.err = d.sink.Deliver(ctx, Delivery{
		Subscription: d.sub.Name(), Event: it.ev, Attempt: j.attempt, Key: Key(d.sub.Name(), it.ev.Position),
	})
	if r.err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errAttemptTimeout) {
			r.err = fmt.Errorf("%w: %w", cause, r.err)
		}
	}
	return r
}

// maintain saves the checkpoint periodically and learns which parked streams
// were resolved.
func (d *Dispatcher) maintain(ctx context.Context, st *parkedState, ws []*worker, unblocks chan<- unblock, stop <-chan struct{}) {
	cpTick := time.NewTicker(d.cfg.CheckpointInterval)
	defer cpTick.Stop()
	var watchdog <-chan time.Time
	if d.cfg.AttemptTimeout > 0 {
		t := time.NewTicker(watchdogTick(d.cfg.AttemptTimeout))
		defer t.Stop()
		watchdog = t.C
	}
	timeout := fmt.Errorf("%w after %v", errAttemptTimeout, d.cfg.AttemptTimeout)
	parkTick := time.NewTicker(d.cfg.ParkedPollInterval)
	defer parkTick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-watchdog:
			for _, w := range ws {
				w.expire(now.Add(-d.cfg.AttemptTimeout), timeout)
			}
		case <-cpTick.C:
			sctx, cancel := context.WithTimeout(ctx, max(d.cfg.CheckpointInterval, minSaveTimeout))
			if err := d.flush(sctx); err != nil {
				d.log.Warn("delivery: save checkpoint failed, retrying at the next tick", "err", err)
			}
			cancel()
		case <-parkTick.C:
			if d.cfg.Ordering != PerStream {
				continue
			}
			st.touched = map[string]bool{}
			if err := d.parked.load(ctx, st); err != nil {
				d.log.Warn("delivery: poll of the parked stream failed", "err", err)
				continue
			}
			for stream := range st.touched {
				if st.perStream[stream] > 0 {
					continue
				}
				select {
				case unblocks <- unblock{stream: stream, version: st.version}:
				case <-stop:
					return
				}
			}
		}
	}
}

type channels struct {
	feed    chan feedBatch
	readErr chan error
	work    chan job
	results chan result
	unblock chan unblock
}

// coordinator owns the dispatcher's state while Run runs: the stream
// queues, the ready and retry heaps and the list of pending events.
type coordinator struct {
	d       *Dispatcher
	streams map[string]*streamQueue
	ready   minHeap[*item] // may start now, by read order
	retries minHeap[*item] // wait for a retry, by due time

	oldest, newest *item // pending items in read order
	pending        int
	inFlight       int
	lastRead       varve.Position
	published      varve.Position
}

func (c *coordinator) loop(ctx context.Context, ch channels, stopReading, stopDelivering context.CancelFunc) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var (
		done     = ctx.Done()
		stopping bool
		drain    <-chan time.Time
		fatal    error
	)
	stop := func() {
		stopping, done = true, nil
		stopReading()
		drain = time.After(c.d.cfg.DrainTimeout)
	}
	for {
		if stopping && c.inFlight == 0 {
			return fatal
		}
		var feed <-chan feedBatch
		if !stopping && c.pending < c.d.cfg.Window {
			feed = ch.feed
		}
		var work chan<- job
		var next job
		if !stopping && c.ready.Len() > 0 {
			it := c.ready.Top()
			work, next = ch.work, job{it: it, attempt: it.attempts + 1}
		}
		var retryC <-chan time.Time
		if c.retries.Len() > 0 && !stopping {
			retryC = timer.C
		}
		select {
		case b := <-feed:
			for _, it := range b.items {
				c.add(it)
			}
			c.lastRead = b.through
			c.advance()
		case work <- next:
			c.ready.Pop()
			if it := next.it; !it.park {
				it.attempts = next.attempt
				if it.attempts == 1 {
					it.first = time.Now()
				}
				c.d.attempts.Add(1)
			}
			c.inFlight++
			c.d.inFlight.Store(int64(c.inFlight))
		case r := <-ch.results:
			c.inFlight--
			c.d.inFlight.Store(int64(c.inFlight))
			c.handle(r, stopping)
		case <-retryC:
			now := time.Now()
			for c.retries.Len() > 0 && !c.retries.Top().due.After(now) {
				c.ready.Push(c.retries.Pop())
			}
		case u := <-ch.unblock:
			c.unblock(u)
		case err := <-ch.readErr:
			fatal = fmt.Errorf("delivery: stopped: %w", err)
			stop()
		case <-done:
			stop()
		case <-drain:
			drain = nil
			stopDelivering()
		}
		if c.retries.Len() > 0 {
			timer.Reset(time.Until(c.retries.Top().due))
		}
	}
}

// add takes a newly read item.
func (c *coordinator) add(it *item) {
	if c.newest == nil {
		c.oldest = it
	} else {
		c.newest.newer, it.older = it, c.newest
	}
	c.newest = it
	c.pending++
	c.d.pending.Store(int64(c.pending))
	c.d.read.Add(1)
	if c.d.cfg.Ordering == Unordered {
		c.ready.Push(it)
		return
	}
	q := c.streams[it.ev.Stream]
	if q == nil {
		q = &streamQueue{name: it.ev.Stream}
		c.streams[it.ev.Stream] = q
	}
	it.q = q
	q.pending = append(q.pending, it)
	if q.current == nil {
		c.startNext(q)
	}
}

// startNext makes the next pending event of q ready.
func (c *coordinator) startNext(q *streamQueue) {
	if len(q.pending) == 0 {
		q.current, q.pending = nil, nil
		if !q.blocked {
			delete(c.streams, q.name)
		}
		return
	}
	it := q.pending[0]
	q.pending[0] = nil
	q.pending = q.pending[1:]
	q.current = it
	if q.blocked {
		c.toPark(it, ReasonStreamParked)
		return
	}
	c.ready.Push(it)
}

func (c *coordinator) toPark(it *item, reason string) {
	it.park = true
	it.record = ParkedEvent{
		Subscription: c.d.sub.Name(), Stream: it.ev.Stream, Version: it.ev.Version, Position: it.ev.Position,
		EventID: it.ev.ID, Type: it.ev.Type, Attempts: it.attempts, Reason: reason,
		FirstAttempt: it.first, ParkedAt: time.Now().UTC(),
	}
	if c.d.keepEvents {
		ev := it.ev
		it.record.Event = &ev
	}
	if it.lastErr != nil {
		it.record.Error = it.lastErr.Error()
	}
	c.ready.Push(it)
}

func (c *coordinator) handle(r result, stopping bool) {
	it := r.it
	switch {
	case r.err == nil && it.park:
		c.d.parkedN.Add(1)
		level := slog.LevelWarn
		if it.record.Reason == ReasonStreamParked {
			level = slog.LevelDebug
		}
		c.d.log.Log(context.Background(), level, "delivery: event parked", "stream", it.ev.Stream, "version", it.ev.Version,
			"position", it.ev.Position, "reason", it.record.Reason, "attempts", it.attempts, "err", it.record.Error)
		if q := it.q; q != nil {
			if !q.blocked {
				c.d.parkedStreams.Add(1)
			}
			q.blocked = true
			q.parkedVersion = r.version
		}
		c.done(it)
	case r.err == nil:
		c.d.delivered.Add(1)
		c.done(it)
	case stopping && errors.Is(r.err, context.Canceled):
		// Cut short by the shutdown: the event stays pending and is read
		// again after a restart.
	case it.park:
		// The store failed to keep the record: try again, never drop it.
		c.d.log.Warn("delivery: parking failed, retrying", "stream", it.ev.Stream, "version", it.ev.Version, "err", r.err)
		c.retryAt(it, time.Now().Add(c.d.cfg.Retry.backoff(2)))
	default:
		it.lastErr = r.err
		if IsPermanent(r.err) {
			c.toPark(it, ReasonRejected)
			return
		}
		pol := c.d.cfg.Retry
		delay := pol.backoff(it.attempts)
		if after := retryAfter(r.err); after > 0 {
			delay = after
		}
		due := time.Now().Add(delay)
		if pol.MaxAttempts > 0 && it.attempts >= pol.MaxAttempts || pol.MaxAge > 0 && due.Sub(it.first) > pol.MaxAge {
			c.toPark(it, ReasonExhausted)
			return
		}
		c.d.retries.Add(1)
		c.d.log.Debug("delivery: attempt failed, retrying", "stream", it.ev.Stream, "version", it.ev.Version,
			"attempt", it.attempts, "in", delay, "err", r.err)
		c.retryAt(it, due)
	}
}

func (c *coordinator) retryAt(it *item, due time.Time) {
	it.due = due
	c.retries.Push(it)
}

// done retires a delivered or parked item.
func (c *coordinator) done(it *item) {
	if it.older == nil {
		c.oldest = it.newer
	} else {
		it.older.newer = it.newer
	}
	if it.newer == nil {
		c.newest = it.older
	} else {
		it.newer.older = it.older
	}
	it.older, it.newer = nil, nil
	c.pending--
	c.d.pending.Store(int64(c.pending))
	if q := it.q; q != nil {
		it.q = nil
		c.startNext(q)
	}
	c.advance()
}

// advance publishes the end of the contiguous prefix of retired items.
func (c *coordinator) advance() {
	cp := c.lastRead
	if c.oldest != nil {
		cp = c.oldest.prev
	}
	if cp != c.published {
		c.published = cp
		c.d.publish(cp)
	}
}

// unblock lets a stream flow again once its parked events were resolved,
// unless it parked another event since the parked stream was read.
func (c *coordinator) unblock(u unblock) {
	q := c.streams[u.stream]
	if q == nil || !q.blocked || q.parkedVersion > u.version || q.current != nil && q.current.park {
		return
	}
	q.blocked = false
	c.d.parkedStreams.Add(-1)
	c.d.log.Info("delivery: parked stream resolved, delivering it again", "stream", q.name)
	if q.current == nil {
		delete(c.streams, q.name)
	}
}
