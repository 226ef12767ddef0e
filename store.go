package varve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Limits and defaults of a [Config].
const (
	MaxStreamIDLen         = 256
	MaxEventTypeLen        = 256
	MaxNameLen             = 256 // a checkpoint's name
	DefaultMaxEventSize    = 1 << 20
	DefaultMaxAppendEvents = 10_000
	DefaultMaxAppendBytes  = 64 << 20
	DefaultPageSize        = 512
	// DefaultMaxPageBytes is the default byte budget of a page of a read:
	// 16 maximal events of the default MaxEventSize, and 512 events (the
	// default page) of 32 KiB, so pages of common events stop at their
	// count as before while a reader of large events holds about 16 MiB
	// instead of up to PageSize MiB.
	DefaultMaxPageBytes = 16 << 20
	// AllStream is the name of the global log; no stream can be called so.
	AllStream = "$all"
	// SystemPrefix begins the ids of system streams, which packages built on
	// the store write through [Store.System]; [Store.Append] refuses them.
	SystemPrefix = "$"
)

// Config configures a [Store]. The zero value gives the defaults.
type Config struct {
	// MaxEventSize bounds len(Data)+len(Metadata) of one event; default 1 MiB,
	// lowered to the backend's Features.MaxEventSize when that is smaller.
	MaxEventSize int
	// MaxAppendEvents bounds the events of one append; default 10,000.
	MaxAppendEvents int
	// MaxAppendBytes bounds the sum of len(Data)+len(Metadata) over the
	// events of one append; default 64 MiB.
	MaxAppendBytes int
	// PageSize is how many events a read asks the backend for at a time;
	// default 512.
	PageSize int
	// MaxPageBytes is the byte budget of a page a read asks the backend
	// for: a page ends with the event that brings the sum of
	// [RecordedEvent.Size] over its events to MaxPageBytes or beyond (so
	// it holds at least one event). Default [DefaultMaxPageBytes] (16 MiB);
	// [PageBytes] sets it per read.
	MaxPageBytes int
	// CategorySeparator ends the category part of a stream id
	// ([Store.Category]); default "-". Backends store each event's category
	// as it was when the event was appended, so a store keeps one separator
	// for its life.
	CategorySeparator string
	// Tracer, when set, traces and measures the store's calls of its
	// backend: spans, metrics, logs of slow calls. New looks once, by type
	// assertion, for the optional interfaces it implements, as pgx does
	// with its tracers, and the Store calls the hooks it found around
	// each of its calls of the backend:
	//
	//   - [StoreTracer]: New asks it for the tracer of this store (knowing
	//     the backend's [Features]) and looks for the others on that one;
	//   - [AppendTracer]: every append (Store.Append, System.Append,
	//     AppendIf, AppendMulti, Snapshots.Append);
	//   - [ReadTracer]: every page a read asks the backend for
	//     (ReadStream, ReadAll and ReadAllPage, filtered or not, ReadQuery
	//     and ReadQueryPage, Snapshots.Read);
	//   - [MetadataInjector]: the metadata of appended events, such as the
	//     trace context of the append.
	//
	// A call that the Store refuses before it reaches the backend (a bad
	// argument, a closed store, a missing capability) is not traced, nor
	// are the other calls of the backend (stream info, lifecycle,
	// snapshots saved or loaded, checkpoints, listings, leases). A Store
	// without a Tracer, or with one that implements none of the
	// interfaces, pays one nil check per call and allocates nothing for
	// it. The hooks run on the goroutine of the call they trace,
	// concurrently for concurrent calls, and must be safe for concurrent
	// use; they must not modify what they are given, nor keep it past the
	// hook. Package otelvarve has one for OpenTelemetry.
	Tracer any
	// Opener, when set, opens the sealed events of every read before the
	// read returns them (package shred's Shredder is one); a read with
	// [Sealed] gets them as stored.
	Opener Opener
}

func (c Config) withDefaults() (Config, error) {
	if c.MaxEventSize < 0 || c.MaxAppendEvents < 0 || c.MaxAppendBytes < 0 || c.PageSize < 0 || c.MaxPageBytes < 0 {
		return c, invalid("negative limit in config %+v", c)
	}
	if c.MaxEventSize == 0 {
		c.MaxEventSize = DefaultMaxEventSize
	}
	if c.MaxAppendEvents == 0 {
		c.MaxAppendEvents = DefaultMaxAppendEvents
	}
	if c.MaxAppendBytes == 0 {
		c.MaxAppendBytes = DefaultMaxAppendBytes
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.MaxPageBytes == 0 {
		c.MaxPageBytes = DefaultMaxPageBytes
	}
	if c.CategorySeparator == "" {
		c.CategorySeparator = DefaultCategorySeparator
	}
	if err := checkText("category separator", c.CategorySeparator); err != nil || len(c.CategorySeparator) > 8 {
		return c, invalid("category separator %q: 1..8 bytes of UTF-8 without NUL", c.CategorySeparator)
	}
	return c, nil
}

// Store is the event store: a [Backend] behind validation, defaults,
// iterators and the facades of the backend's optional capabilities. It is
// safe for concurrent use.
type Store struct {
	b      Backend
	cfg    Config
	closed atomic.Bool
	// life ends at Close, with ErrClosed as its cause, and ends every read in
	// flight with it.
	life  context.Context
	kill  context.CancelCauseFunc
	pages sync.Pool // *[]RecordedEvent of capacity cfg.PageSize

	snaps    SnapshotStore       // nil when the backend has none
	inline   CommitSnapshotStore // nil when the backend keeps no snapshots in commits
	cps      CheckpointStore     // nil when the backend has none
	watcher  Watcher             // nil when the backend cannot notify
	filtered FilteredReader      // nil when the Store filters pages itself
	multi    MultiAppender       // nil when the backend appends to one stream at a time
	tags     TagStore            // nil when the backend keeps no tags
	leases   LeaseStore          // nil when the backend keeps no leases
	tr       *tracing            // nil without a Tracer's hooks
}

// New returns a Store over b. The Store owns b: closing the Store closes b.
func New(b Backend, cfg Config) (*Store, error) {
	if b == nil {
		return nil, invalid("nil backend")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if max := b.Features().MaxEventSize; max > 0 && max < cfg.MaxEventSize {
		cfg.MaxEventSize = max
	}
	s := &Store{b: b, cfg: cfg}
	s.life, s.kill = context.WithCancelCause(context.Background())
	s.snaps = capability[SnapshotStore](b)
	// Snapshots in commits only from the backend that keeps the store's
	// snapshots, not from one under a wrapper that keeps them itself.
	if c, depth := capabilityAt[CommitSnapshotStore](b); c != nil {
		if _, d := capabilityAt[SnapshotStore](b); d == depth {
			s.inline = c
		}
	}
	s.cps = capability[CheckpointStore](b)
	s.watcher = capability[Watcher](b)
	s.filtered = capability[FilteredReader](b)
	s.multi = capability[MultiAppender](b)
	if s.multi != nil && !s.multi.MultiAppendAvailable() {
		s.multi = nil
	}
	s.tags = capability[TagStore](b)
	s.leases = capability[LeaseStore](b)
	if cfg.Tracer != nil {
		s.tr = newTracing(cfg.Tracer, b.Features())
	}
	s.pages.New = func() any {
		p := make([]RecordedEvent, 0, cfg.PageSize)
		return &p
	}
	return s, nil
}

// Backend returns the store's backend. Applications rarely need it: the
// Store hands out every capability behind its own checks.
func (s *Store) Backend() Backend { return s.b }

// Features returns the backend's facts.
func (s *Store) Features() Features { return s.b.Features() }

// Config returns the store's effective configuration.
func (s *Store) Config() Config { return s.cfg }

// Close ends the reads in flight with [ErrClosed], then closes the backend.
// It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.kill(ErrClosed)
	return s.b.Close()
}

func (s *Store) ready(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// readContext returns ctx, ended also when the store closes, and the
// function that releases it. Reads run under it so that Close interrupts
// them instead of waiting for them.
func (s *Store) readContext(ctx context.Context) (context.Context, func()) {
	rctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.life, func() { cancel(ErrClosed) })
	return rctx, func() {
		stop()
		cancel(nil)
	}
}

// readErr is the error of a read under rctx: ErrClosed when Close ended it.
func readErr(rctx context.Context, err error) error {
	if err != nil && !errors.Is(err, ErrClosed) && errors.Is(context.Cause(rctx), ErrClosed) {
		return ErrClosed
	}
	return err
}

// LastPosition returns a position at or after the newest event readable in
// $all, and before every event that commits later.
func (s *Store) LastPosition(ctx context.Context) (Position, error) {
	if err := s.ready(ctx); err != nil {
		return Position{}, fmt.Errorf("varve: last position: %w", err)
	}
	p, err := s.b.LastPosition(ctx)
	if err != nil {
		return Position{}, fmt.Errorf("varve: last position: %w", err)
	}
	return p, nil
}

// StreamInfo describes stream; [ErrStreamNotFound] if it never existed.
// System streams can be described too.
func (s *Store) StreamInfo(ctx context.Context, stream string) (StreamInfo, error) {
	err := s.ready(ctx)
	if err == nil {
		err = checkStream(stream, true)
	}
	if err != nil {
		return StreamInfo{}, fmt.Errorf("varve: stream info of %q: %w", stream, err)
	}
	info, err := s.b.StreamInfo(ctx, stream)
	if err != nil {
		return StreamInfo{}, fmt.Errorf("varve: stream info of %q: %w", stream, err)
	}
	return info, nil
}

// IsRetryable reports whether err is a concurrency conflict that a reload
// and retry of the command may resolve: a wrong expected version or a
// failed append condition.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrWrongExpectedVersion) || errors.Is(err, ErrAppendConditionFailed)
}
