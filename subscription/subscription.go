package subscription

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/varve-go/varve"
)

// From says where a subscription starts reading.
type From uint8

const (
	// FromCheckpointOrBeginning resumes after the saved checkpoint, or reads
	// the whole log when there is none. It is the default.
	FromCheckpointOrBeginning From = iota
	// FromCheckpointOrEnd resumes after the saved checkpoint, or starts at
	// the end of the log (only new events) when there is none.
	FromCheckpointOrEnd
	// FromBeginning reads the whole log, whatever the checkpoint says.
	FromBeginning
	// FromEnd reads only events committed after the subscription opens.
	FromEnd
	// FromPosition reads the events after [Config.Position].
	FromPosition
)

func (f From) String() string {
	switch f {
	case FromCheckpointOrBeginning:
		return "checkpoint-or-beginning"
	case FromCheckpointOrEnd:
		return "checkpoint-or-end"
	case FromBeginning:
		return "beginning"
	case FromEnd:
		return "end"
	case FromPosition:
		return "position"
	}
	return fmt.Sprintf("From(%d)", uint8(f))
}

// MaxNameLen bounds a subscription name, so that names derived from it (such
// as the parked stream of package delivery) are valid stream ids.
const MaxNameLen = 200

// Defaults of a [Config].
const (
	DefaultMinPoll = 10 * time.Millisecond
	DefaultMaxPoll = time.Second
)

// runSaveTimeout bounds each checkpoint save of [Subscription.Run]. A save
// also runs after Run's context ended, for the events handled before, so
// it cannot use that context's deadline.
const runSaveTimeout = 10 * time.Second

// Config configures a [Subscription]. Only Name is required.
type Config struct {
	// Name identifies the subscription: the key of its checkpoint. 1..200
	// bytes of UTF-8.
	Name string
	// Start says where to start; by default after the saved checkpoint, or
	// at the beginning of the log.
	Start From
	// Position is the position after which FromPosition starts.
	Position varve.Position

	// Stream, when set (and not "$all"), keeps only the events of that
	// stream, read with the stream's own reads rather than the global log;
	// the other filters then do not apply. The checkpoint is still the
	// position of the last event handled.
	Stream string
	// Filter, when not zero, keeps only the events it matches (categories,
	// stream prefixes, event types); the backend reads only those where it
	// can ([varve.FilteredReader]). Every consumer (delivery, projection)
	// takes the same [varve.Filter].
	Filter varve.Filter
	// Query, when it has items, keeps only the events it matches (types
	// and tags, as in dcb.events): a subscription to a dynamic consistency
	// boundary, read through the backend's tag indexes
	// ([varve.Store.ReadQueryPage]) and checkpointed like any other. It
	// needs a store that keeps tags ([varve.Capabilities].Tags), and goes
	// with neither Filter nor Stream.
	Query varve.Query
	// SystemStreams keeps the events of streams whose id begins with "$".
	SystemStreams bool
	// Sealed hands out events as stored, without the store's
	// [varve.Config.Opener] ([varve.Sealed]): for a reader that keeps
	// events and opens each at use with [varve.Store.Open], as a
	// dispatcher of package delivery does at each attempt.
	Sealed bool
	// Segments, when more than 1, keeps only the events of the streams in
	// segment Segment (0..Segments-1) by [SegmentOf]; a segmented
	// subscription under leases ([Lease.Segments]) sets both for each
	// segment it runs.
	Segment, Segments int

	// PageSize is how many events one read asks for; default the store's
	// page size.
	PageSize int
	// MinPoll and MaxPoll bound the polling interval of a caught-up
	// subscription on a backend that cannot notify (defaults 10ms and 1s).
	// With notifications, MaxPoll is the safety poll in case one is lost.
	MinPoll, MaxPoll time.Duration

	// Lease runs the subscription across processes under leases, with
	// [Run] and [RunWith]: single-active, or segmented.
	Lease Lease
	// Heartbeat is how often a running subscription renews the lease that
	// says it runs ([Subscription.Heartbeat], [Running]); default
	// DefaultHeartbeat, negative for none.
	Heartbeat time.Duration

	// Checkpoints keeps the checkpoint. Nil means the store's own
	// ([varve.Store.Checkpoints]) when its backend keeps checkpoints, else
	// process memory.
	Checkpoints varve.CheckpointStore
}

// Batch is what one read of the log gave.
type Batch struct {
	// Events are the events that passed the filters, in position order. The
	// slice is reused by the next call of Next; copy what you keep.
	Events []varve.RecordedEvent
	// Through is the position the read went through, past the events that
	// were filtered out: once Events are handled, the subscription's
	// checkpoint may move to it.
	Through varve.Position
}

// Subscription reads the global log from a starting point, then follows it.
type Subscription struct {
	store   *varve.Store
	cfg     Config
	cps     varve.CheckpointStore
	durable bool
	filter  varve.Filter
	start   varve.Position
	// next is the version a subscription to one stream reads from, and
	// last the event before it (version next-1) as it was read: the next
	// read starts at that event, to tell the stream it read from one
	// truncated, or deleted and written again, since.
	next        varve.Version
	last        varve.RecordedEvent
	pos         varve.Position
	buf, out    []varve.RecordedEvent
	resumedFrom bool
}

// Open resolves the subscription's checkpoint store and starting position.
func Open(ctx context.Context, store *varve.Store, cfg Config) (*Subscription, error) {
	if store == nil {
		return nil, fmt.Errorf("subscription: open: nil store: %w", varve.ErrInvalidArgument)
	}
	if err := checkConfig(&cfg, store); err != nil {
		return nil, fmt.Errorf("subscription %q: open: %w", cfg.Name, err)
	}
	if err := describe(ctx, store, cfg); err != nil {
		return nil, fmt.Errorf("subscription %q: open: %w", cfg.Name, err)
	}
	s := &Subscription{store: store, cfg: cfg, cps: cfg.Checkpoints, durable: true}
	if s.cps == nil {
		if caps := store.Capabilities(); caps.Checkpoints {
			s.cps, s.durable = storeCheckpoints{store.Checkpoints()}, caps.Durable
		} else {
			s.cps, s.durable = NewMemoryCheckpoints(), false
		}
	}
	s.filter = cfg.Filter
	start, resumed, err := s.startPosition(ctx)
	if err != nil {
		return nil, err
	}
	s.start, s.pos, s.resumedFrom = start, start, resumed
	return s, nil
}

func checkConfig(cfg *Config, store *varve.Store) error {
	if n := len(cfg.Name); n == 0 || n > MaxNameLen || !utf8.ValidString(cfg.Name) {
		return fmt.Errorf("%w: name must be 1..%d bytes of UTF-8", varve.ErrInvalidArgument, MaxNameLen)
	}
	if cfg.Start > FromPosition {
		return fmt.Errorf("%w: start %v", varve.ErrInvalidArgument, cfg.Start)
	}
	if cfg.Stream == varve.AllStream {
		cfg.Stream = ""
	}
	if cfg.Segments > 1 && (cfg.Segments > MaxSegments || cfg.Segment < 0 || cfg.Segment >= cfg.Segments || cfg.Stream != "") {
		return fmt.Errorf("%w: segment %d of %d (at most %d, of $all)", varve.ErrInvalidArgument, cfg.Segment, cfg.Segments, MaxSegments)
	}
	if len(cfg.Query.Items) > 0 {
		switch {
		case !cfg.Filter.IsZero() || cfg.Stream != "":
			return fmt.Errorf("%w: a query goes with neither a filter nor a stream", varve.ErrInvalidArgument)
		case !store.Capabilities().Tags:
			return fmt.Errorf("a query: %w: the store keeps no tags", varve.ErrNotSupported)
		}
	}
	if cfg.PageSize < 0 || cfg.MinPoll < 0 || cfg.MaxPoll < 0 {
		return fmt.Errorf("%w: negative page size or poll interval", varve.ErrInvalidArgument)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = store.Config().PageSize
	}
	if cfg.MinPoll == 0 {
		cfg.MinPoll = DefaultMinPoll
	}
	if cfg.MaxPoll == 0 {
		cfg.MaxPoll = DefaultMaxPoll
	}
	if cfg.MaxPoll < cfg.MinPoll {
		cfg.MaxPoll = cfg.MinPoll
	}
	return nil
}

func (s *Subscription) startPosition(ctx context.Context) (pos varve.Position, resumed bool, err error) {
	last := func() (varve.Position, bool, error) {
		pos, err := s.store.LastPosition(ctx)
		if err != nil {
			return pos, false, fmt.Errorf("subscription %q: open: %w", s.cfg.Name, err)
		}
		return pos, false, nil
	}
	switch s.cfg.Start {
	case FromBeginning:
		return varve.Start, false, nil
	case FromPosition:
		return s.cfg.Position, false, nil
	case FromEnd:
		return last()
	}
	pos, ok, err := s.LoadCheckpoint(ctx)
	switch {
	case err != nil:
		return pos, false, err
	case ok:
		return pos, true, nil
	case s.cfg.Start == FromCheckpointOrEnd:
		return last()
	}
	return varve.Start, false, nil
}

// Name returns the subscription's name.
func (s *Subscription) Name() string { return s.cfg.Name }

// Segment returns the segment the subscription reads and the number of
// segments (0 and 0 when it is not segmented).
func (s *Subscription) Segment() (i, count int) {
	if s.cfg.Segments <= 1 {
		return 0, 0
	}
	return s.cfg.Segment, s.cfg.Segments
}

// Store returns the store the subscription reads.
func (s *Subscription) Store() *varve.Store { return s.store }

// Sealed reports whether the subscription hands out events as stored
// (Config.Sealed).
func (s *Subscription) Sealed() bool { return s.cfg.Sealed }

// readOpts are the options of a page of $all: the page size, and Sealed
// when Config.Sealed says so.
func (s *Subscription) readOpts() []varve.AllOption {
	opts := []varve.AllOption{varve.PageSize(s.cfg.PageSize)}
	if s.cfg.Sealed {
		opts = append(opts, varve.Sealed())
	}
	return opts
}

// streamOpts are the options of a page of the subscription's stream from
// version from.
func (s *Subscription) streamOpts(from varve.Version) []varve.StreamOption {
	opts := []varve.StreamOption{varve.From(from), varve.Limit(s.cfg.PageSize + 1)}
	if s.cfg.Sealed {
		opts = append(opts, varve.Sealed())
	}
	return opts
}

// StartPosition returns the position the subscription started after, and
// whether it came from a saved checkpoint.
func (s *Subscription) StartPosition() (pos varve.Position, resumed bool) {
	return s.start, s.resumedFrom
}

// Position returns the position of the last event read.
func (s *Subscription) Position() varve.Position { return s.pos }

// DurableCheckpoints reports whether the checkpoint survives a restart of
// the process: false when it is kept in memory.
func (s *Subscription) DurableCheckpoints() bool { return s.durable }

// Checkpoints returns the store that keeps the subscription's checkpoint.
func (s *Subscription) Checkpoints() varve.CheckpointStore { return s.cps }

// SaveCheckpoint saves pos as the subscription's checkpoint: everything up
// to pos was handled.
func (s *Subscription) SaveCheckpoint(ctx context.Context, pos varve.Position) error {
	if err := s.cps.SaveCheckpoint(ctx, s.cfg.Name, pos); err != nil {
		return s.checkpointError("save", err)
	}
	return nil
}

// LoadCheckpoint returns the saved checkpoint; ok is false if there is none.
func (s *Subscription) LoadCheckpoint(ctx context.Context) (pos varve.Position, ok bool, err error) {
	pos, ok, err = s.cps.LoadCheckpoint(ctx, s.cfg.Name)
	if err != nil {
		return pos, false, s.checkpointError("load", err)
	}
	return pos, ok, nil
}

// checkpointError gives a checkpoint store's error the context it lacks.
// The store's own checkpoints already name the operation and the
// checkpoint, which is the subscription's name.
func (s *Subscription) checkpointError(op string, err error) error {
	if _, ok := s.cps.(storeCheckpoints); ok {
		return fmt.Errorf("subscription: %w", err)
	}
	return fmt.Errorf("subscription %q: %s checkpoint: %w", s.cfg.Name, op, err)
}

// Next reads the next page of the log, waiting for new events when the
// subscription is caught up. The batch's Events may be empty when every
// event read was filtered out; its Through position has moved on all the
// same. Next returns the context's error when ctx ends while it waits.
func (s *Subscription) Next(ctx context.Context) (Batch, error) {
	poll := s.cfg.MinPoll
	for {
		b, ok, err := s.read(ctx)
		if err != nil || ok {
			return b, err
		}
		var wake <-chan struct{}
		wait := poll
		if s.store.Capabilities().Watch {
			// Ask for the wake-up before reading again, so that a commit
			// between the two reads is not missed.
			wake = s.store.Watch()
			if b, ok, err = s.read(ctx); err != nil || ok {
				return b, err
			}
			wait = s.cfg.MaxPoll
		} else {
			poll = min(2*poll, s.cfg.MaxPoll)
		}
		if err := sleep(ctx, wake, wait); err != nil {
			return Batch{}, err
		}
	}
}

func sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-t.C:
	}
	return nil
}

// read reads one page; ok is false when there was nothing new.
func (s *Subscription) read(ctx context.Context) (Batch, bool, error) {
	if s.cfg.Stream != "" {
		return s.readStream(ctx)
	}
	var res varve.AllPage
	var err error
	if len(s.cfg.Query.Items) > 0 {
		res, err = s.store.ReadQueryPage(ctx, s.cfg.Query, s.pos, s.buf[:0], s.readOpts()...)
	} else {
		res, err = s.store.ReadAllPage(ctx, s.pos, s.buf[:0], append(s.readOpts(), s.filter)...)
	}
	page := res.Events
	s.buf = page
	if err != nil {
		return Batch{}, false, fmt.Errorf("subscription %q: %w", s.cfg.Name, err)
	}
	if res.Through == s.pos {
		return Batch{}, false, nil
	}
	out := s.out[:0]
	for i := range page {
		if (s.cfg.SystemStreams || !strings.HasPrefix(page[i].Stream, varve.SystemPrefix)) && s.inSegment(page[i].Stream) {
			out = append(out, page[i])
		}
	}
	s.pos = res.Through
	clear(page) // the events were copied to out; drop the references
	s.out = out
	return Batch{Events: out, Through: s.pos}, true, nil
}

// readStream reads the next page of the subscription's stream: the events
// after the last one read whose positions follow the subscription's. The
// read starts at the last event read; when that event is gone or another
// (the stream was truncated, or deleted and written again), it reads the
// stream from its start and keeps the events after the subscription's
// position, which are those of the stream's new life.
func (s *Subscription) readStream(ctx context.Context) (Batch, bool, error) {
	out := s.out[:0]
	for {
		check := s.next > 1
		from := max(s.next, 2) - 1
		restart, n := check, 0
		for e, err := range s.store.ReadStream(ctx, s.cfg.Stream, s.streamOpts(from)...) {
			if errors.Is(err, varve.ErrStreamNotFound) || errors.Is(err, varve.ErrStreamDeleted) {
				s.next, restart = 0, false // a new life starts at version 1
				break
			}
			if err != nil {
				return Batch{}, false, fmt.Errorf("subscription %q: %w", s.cfg.Name, err)
			}
			n++
			if check {
				check = false
				if restart = e.Version != from || e.ID != s.last.ID || e.Position != s.last.Position; restart {
					break
				}
				continue
			}
			if s.pos.Less(e.Position) {
				out = append(out, e)
				s.pos = e.Position
			}
			s.next, s.last = e.Version+1, e
		}
		if restart {
			s.next = 0
			continue
		}
		// A page of events at or before the position (a subscription that
		// resumes from a checkpoint) moves the read on.
		if len(out) > 0 || n <= s.cfg.PageSize {
			break
		}
	}
	s.out = out
	if len(out) == 0 {
		return Batch{}, false, nil
	}
	return Batch{Events: out, Through: s.pos}, true, nil
}

// Handler handles one event of a subscription.
type Handler func(ctx context.Context, e varve.RecordedEvent) error

// Run calls h for each event, one at a time in position order, and saves
// the checkpoint after each batch. When h fails, Run saves the checkpoint
// of the events handled before and returns h's error; the failed event is
// read again by the next Run. Run returns nil when ctx ends, also when h
// fails with ctx's error then (that event is read again too); each save of
// the checkpoint, also the one after ctx ended, may take up to 10s. For
// many deliveries at once, use package delivery.
func (s *Subscription) Run(ctx context.Context, h Handler) error {
	defer s.Heartbeat(ctx)()
	saved := s.pos
	save := func(pos varve.Position) error {
		if pos == saved {
			return nil
		}
		// The batch is handled: save it even when ctx has just ended.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runSaveTimeout)
		defer cancel()
		if err := s.SaveCheckpoint(sctx, pos); err != nil {
			return err
		}
		saved = pos
		return nil
	}
	for {
		b, err := s.Next(ctx)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil
			}
			return err
		}
		last := saved // every event up to the batch's start was handled
		for _, e := range b.Events {
			if err := h(ctx, e); err != nil {
				// The events between last and e are read and filtered
				// again by the next Run; resuming after last loses nothing.
				s.pos = last
				if serr := save(last); serr != nil {
					return errors.Join(err, serr)
				}
				if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
					return nil // ended, not failed: the event is read again
				}
				return fmt.Errorf("subscription %q: handle %s@%d (position %v): %w", s.cfg.Name, e.Stream, e.Version, e.Position, err)
			}
			last = e.Position
		}
		if err := save(b.Through); err != nil {
			return err
		}
	}
}
