package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/notify"
	"github.com/varve-go/varve/subscription"
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
	// store keeps the source's events; it opens each sealed event at each
	// attempt to send it. Nil for a source without a store.
	store *varve.Store
	// opens: the store has an Opener, so each attempt opens its event.
	opens bool

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
	if store != nil && store.Config().Opener != nil {
		if s, ok := src.(interface{ Sealed() bool }); ok && !s.Sealed() {
			return nil, fmt.Errorf("delivery: new dispatcher of %q: %w: the store opens sealed events, so the subscription must read them sealed (subscription.Config.Sealed): the dispatcher then holds no plaintext and opens each event when it sends it", src.Name(), varve.ErrInvalidArgument)
		}
	}
	d := &Dispatcher{sub: src, sink: sink, cfg: cfg, parked: cfg.Parked, log: cfg.Logger, stopped: make(chan struct{}), keepEvents: store == nil, store: store}
	if d.parked == nil {
		if store == nil {
			return nil, fmt.Errorf("delivery: new dispatcher of %q: %w: the source keeps no store, Config.Parked is required", src.Name(), varve.ErrInvalidArgument)
		}
		d.parked = NewParked(store, src.Name())
	}
	d.opens = store != nil && store.Config().Opener != nil
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
	if sub, ok := d.sub.(*subscription.Subscription); ok {
		defer sub.Heartbeat(ctx)()
	}
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
