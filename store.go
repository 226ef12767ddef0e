package varve

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Limits and defaults of a [Config].
const (
	MaxStreamIDLen         = 256
	MaxEventTypeLen        = 256
	DefaultMaxEventSize    = 1 << 20
	DefaultMaxAppendEvents = 10_000
	DefaultPageSize        = 512
	// AllStream is the name of the global log; no stream can be called so.
	AllStream = "$all"
)

// Config configures a [Store]. The zero value gives the defaults.
type Config struct {
	// MaxEventSize bounds len(Data)+len(Metadata) of one event; default 1 MiB,
	// lowered to the backend's Features.MaxEventSize when that is smaller.
	MaxEventSize int
	// MaxAppendEvents bounds the events of one append; default 10,000.
	MaxAppendEvents int
	// PageSize is how many events a read asks the backend for at a time;
	// default 512.
	PageSize int
}

func (c Config) withDefaults() (Config, error) {
	if c.MaxEventSize < 0 || c.MaxAppendEvents < 0 || c.PageSize < 0 {
		return c, invalid("negative limit in config %+v", c)
	}
	if c.MaxEventSize == 0 {
		c.MaxEventSize = DefaultMaxEventSize
	}
	if c.MaxAppendEvents == 0 {
		c.MaxAppendEvents = DefaultMaxAppendEvents
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	return c, nil
}

// Store is the event store: a [Backend] behind validation, defaults and
// iterators. It is safe for concurrent use.
type Store struct {
	b      Backend
	cfg    Config
	closed atomic.Bool
	pages  sync.Pool // *[]RecordedEvent of capacity cfg.PageSize
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
	s.pages.New = func() any {
		p := make([]RecordedEvent, 0, cfg.PageSize)
		return &p
	}
	return s, nil
}

// Backend returns the store's backend, for optional capabilities such as
// [SnapshotStore], [CheckpointStore] and [Watcher].
func (s *Store) Backend() Backend { return s.b }

// Features returns the backend's declared features.
func (s *Store) Features() Features { return s.b.Features() }

// Config returns the store's effective configuration.
func (s *Store) Config() Config { return s.cfg }

// Close closes the store and its backend. It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.b.Close()
}

func (s *Store) ready(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// Append appends events atomically to stream if its version matches
// expected. Events with a zero ID get a new UUIDv7 written into the caller's
// slice, so that retrying the same slice after an ambiguous failure (a
// timeout, a lost connection) is idempotent.
func (s *Store) Append(ctx context.Context, stream string, expected ExpectedVersion, events ...Event) (AppendResult, error) {
	if err := s.ready(ctx); err != nil {
		return AppendResult{}, fmt.Errorf("varve: append to %q: %w", stream, err)
	}
	if err := s.checkAppend(stream, expected, events); err != nil {
		return AppendResult{}, fmt.Errorf("varve: append to %q: %w", stream, err)
	}
	res, err := s.b.Append(ctx, AppendRequest{Stream: stream, Expected: expected, Events: events})
	if err != nil {
		return AppendResult{}, fmt.Errorf("varve: append to %q: %w", stream, err)
	}
	return res, nil
}

func (s *Store) checkAppend(stream string, expected ExpectedVersion, events []Event) error {
	if err := CheckStreamID(stream); err != nil {
		return err
	}
	if !expected.valid() {
		return invalid("expected version %d", int64(expected))
	}
	n := len(events)
	if n == 0 {
		return invalid("no events")
	}
	if n > s.cfg.MaxAppendEvents {
		return invalid("%d events in one append, limit %d", n, s.cfg.MaxAppendEvents)
	}
	for i := range events {
		e := &events[i]
		if len(e.Type) == 0 || len(e.Type) > MaxEventTypeLen || !utf8.ValidString(e.Type) {
			return invalid("event %d: type must be 1..%d bytes of UTF-8, got %d bytes", i, MaxEventTypeLen, len(e.Type))
		}
		if size := len(e.Data) + len(e.Metadata); size > s.cfg.MaxEventSize {
			return invalid("event %d: data+metadata is %d bytes, limit %d", i, size, s.cfg.MaxEventSize)
		}
		if e.ID == uuid.Nil {
			e.ID = NewEventID()
		}
	}
	return checkDistinctIDs(events)
}

func checkDistinctIDs(events []Event) error {
	if len(events) <= 16 {
		for i := 1; i < len(events); i++ {
			for j := 0; j < i; j++ {
				if events[i].ID == events[j].ID {
					return invalid("event %d repeats the id of event %d", i, j)
				}
			}
		}
		return nil
	}
	seen := make(map[uuid.UUID]int, len(events))
	for i, e := range events {
		if j, dup := seen[e.ID]; dup {
			return invalid("event %d repeats the id of event %d", i, j)
		}
		seen[e.ID] = i
	}
	return nil
}

// CheckStreamID reports whether id is a valid stream id: 1..256 bytes of
// UTF-8, and not "$all".
func CheckStreamID(id string) error {
	if len(id) == 0 || len(id) > MaxStreamIDLen {
		return invalid("stream id must be 1..%d bytes, got %d", MaxStreamIDLen, len(id))
	}
	if !utf8.ValidString(id) {
		return invalid("stream id is not valid UTF-8")
	}
	if id == AllStream {
		return invalid("%q is the global log, not a stream", AllStream)
	}
	return nil
}

// ReadOption is a per-call choice of a read.
type ReadOption func(*readOptions)

type readOptions struct {
	dir      Direction
	from     Version
	limit    int
	pageSize int
}

// ReadBackward reads a stream from its end (or from [From]) towards its start.
func ReadBackward() ReadOption { return func(o *readOptions) { o.dir = Backward } }

// From starts a stream read at version v (inclusive).
func From(v Version) ReadOption { return func(o *readOptions) { o.from = v } }

// Limit stops a read after n events; 0 means no limit.
func Limit(n int) ReadOption { return func(o *readOptions) { o.limit = n } }

// PageSize sets how many events one backend round trip asks for.
func PageSize(n int) ReadOption { return func(o *readOptions) { o.pageSize = n } }

func (s *Store) readOptions(opts []ReadOption) (readOptions, error) {
	o := readOptions{pageSize: s.cfg.PageSize}
	for _, opt := range opts {
		opt(&o)
	}
	if o.limit < 0 || o.pageSize <= 0 {
		return o, invalid("limit %d, page size %d", o.limit, o.pageSize)
	}
	return o, nil
}

func (s *Store) page(o readOptions) (*[]RecordedEvent, int) {
	n := o.pageSize
	if o.limit > 0 && o.limit < n {
		n = o.limit
	}
	if n == s.cfg.PageSize {
		return s.pages.Get().(*[]RecordedEvent), n
	}
	p := make([]RecordedEvent, 0, n)
	return &p, n
}

// release returns a page buffer to the pool after dropping its references
// to event data in the first used slots, the only ones a read wrote.
func (s *Store) release(p *[]RecordedEvent, used int) {
	if cap(*p) != s.cfg.PageSize {
		return
	}
	clear((*p)[:used])
	*p = (*p)[:0]
	s.pages.Put(p)
}

// ReadStream returns the events of stream, forward from its start unless
// options say otherwise. The iterator reads lazily, a page at a time, and
// stops after the first error. A stream that does not exist gives
// [ErrStreamNotFound]; a tombstoned one [ErrStreamDeleted].
func (s *Store) ReadStream(ctx context.Context, stream string, opts ...ReadOption) iter.Seq2[RecordedEvent, error] {
	return func(yield func(RecordedEvent, error) bool) {
		fail := func(err error) { yield(RecordedEvent{}, fmt.Errorf("varve: read stream %q: %w", stream, err)) }
		if err := s.ready(ctx); err != nil {
			fail(err)
			return
		}
		if err := CheckStreamID(stream); err != nil {
			fail(err)
			return
		}
		o, err := s.readOptions(opts)
		if err != nil {
			fail(err)
			return
		}
		buf, n := s.page(o)
		used := 0
		defer func() { s.release(buf, used) }()
		q := StreamQuery{Stream: stream, Direction: o.dir, From: o.from}
		left := o.limit
		for {
			q.Limit = n
			if left > 0 && left < n {
				q.Limit = left
			}
			page, err := s.b.ReadStream(ctx, q, (*buf)[:0])
			*buf, used = page[:0], max(used, len(page))
			if err != nil {
				fail(err)
				return
			}
			for i := range page {
				if !yield(page[i], nil) {
					return
				}
			}
			if len(page) < q.Limit {
				return
			}
			if left > 0 {
				if left -= len(page); left == 0 {
					return
				}
			}
			last := page[len(page)-1].Version
			if o.dir == Forward {
				q.From = last + 1
			} else {
				if last <= 1 {
					return
				}
				q.From = last - 1
			}
		}
	}
}

// ReadAll returns the events of the global log after position after, in
// position order. Only [Limit] and [PageSize] apply.
func (s *Store) ReadAll(ctx context.Context, after Position, opts ...ReadOption) iter.Seq2[RecordedEvent, error] {
	return func(yield func(RecordedEvent, error) bool) {
		fail := func(err error) { yield(RecordedEvent{}, fmt.Errorf("varve: read $all: %w", err)) }
		if err := s.ready(ctx); err != nil {
			fail(err)
			return
		}
		o, err := s.readOptions(opts)
		if err != nil {
			fail(err)
			return
		}
		if o.dir != Forward || o.from != 0 {
			fail(invalid("$all is read forward from a position"))
			return
		}
		buf, n := s.page(o)
		used := 0
		defer func() { s.release(buf, used) }()
		q := AllQuery{After: after}
		left := o.limit
		for {
			q.Limit = n
			if left > 0 && left < n {
				q.Limit = left
			}
			page, err := s.b.ReadAll(ctx, q, (*buf)[:0])
			*buf, used = page[:0], max(used, len(page))
			if err != nil {
				fail(err)
				return
			}
			for i := range page {
				if !yield(page[i], nil) {
					return
				}
			}
			if len(page) < q.Limit {
				return
			}
			if left > 0 {
				if left -= len(page); left == 0 {
					return
				}
			}
			q.After = page[len(page)-1].Position
		}
	}
}

// ReadAllPage reads one page of at most limit events of the global log after
// position after into buf; subscriptions use it to checkpoint page by page.
func (s *Store) ReadAllPage(ctx context.Context, after Position, limit int, buf []RecordedEvent) ([]RecordedEvent, error) {
	if err := s.ready(ctx); err != nil {
		return buf, fmt.Errorf("varve: read $all: %w", err)
	}
	if limit <= 0 {
		return buf, fmt.Errorf("varve: read $all: %w", invalid("limit %d", limit))
	}
	page, err := s.b.ReadAll(ctx, AllQuery{After: after, Limit: limit}, buf)
	if err != nil {
		return page, fmt.Errorf("varve: read $all: %w", err)
	}
	return page, nil
}

// LastPosition returns the position of the newest event readable in $all.
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
func (s *Store) StreamInfo(ctx context.Context, stream string) (StreamInfo, error) {
	err := s.ready(ctx)
	if err == nil {
		err = CheckStreamID(stream)
	}
	if err != nil {
		return StreamInfo{}, fmt.Errorf("varve: stream info %q: %w", stream, err)
	}
	info, err := s.b.StreamInfo(ctx, stream)
	if err != nil {
		return StreamInfo{}, fmt.Errorf("varve: stream info %q: %w", stream, err)
	}
	return info, nil
}

// Truncate removes the events of stream with versions below before. The
// stream's version does not change.
func (s *Store) Truncate(ctx context.Context, stream string, before Version) error {
	err := s.ready(ctx)
	if err == nil {
		err = CheckStreamID(stream)
	}
	if err == nil {
		err = s.b.Truncate(ctx, stream, before)
	}
	if err != nil {
		return fmt.Errorf("varve: truncate %q before %d: %w", stream, before, err)
	}
	return nil
}

// Delete removes every event of stream if its version matches expected. A
// later append with [NoStream] or [Any] starts the stream afresh at version 1.
func (s *Store) Delete(ctx context.Context, stream string, expected ExpectedVersion) error {
	return s.delete(ctx, stream, expected, false)
}

// Tombstone deletes stream for good: every later append fails with
// [ErrStreamDeleted].
func (s *Store) Tombstone(ctx context.Context, stream string, expected ExpectedVersion) error {
	return s.delete(ctx, stream, expected, true)
}

func (s *Store) delete(ctx context.Context, stream string, expected ExpectedVersion, tombstone bool) error {
	err := s.ready(ctx)
	if err == nil {
		err = CheckStreamID(stream)
	}
	if err == nil && !expected.valid() {
		err = invalid("expected version %d", int64(expected))
	}
	if err == nil {
		err = s.b.Delete(ctx, stream, expected, tombstone)
	}
	if err != nil {
		what := "delete"
		if tombstone {
			what = "tombstone"
		}
		return fmt.Errorf("varve: %s %q: %w", what, stream, err)
	}
	return nil
}

// IsRetryable reports whether err is a concurrency conflict that a reload
// and retry of the command may resolve.
func IsRetryable(err error) bool { return errors.Is(err, ErrWrongExpectedVersion) }
