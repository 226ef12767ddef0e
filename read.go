package varve

import (
	"context"
	"fmt"
	"iter"
)

// StreamOption is a per-call choice of [Store.ReadStream]: [From] and the
// [ReadOption]s that fit every read.
type StreamOption interface{ applyStream(*streamOptions) }

// AllOption is a per-call choice of [Store.ReadAll] and [Store.ReadAllPage]:
// a [Filter] and the [ReadOption]s that fit every read.
type AllOption interface{ applyAll(*allOptions) }

// ReadOption is a choice that fits every read: [ReadBackward], [Limit],
// [PageSize], [PageBytes] and [Sealed].
type ReadOption struct {
	kind readOptionKind
	n    int
}

type readOptionKind uint8

const (
	optPageSize readOptionKind = iota
	optLimit
	optPageBytes
	optBackward
	optSealed
)

func (o ReadOption) apply(p *paging) {
	switch o.kind {
	case optLimit:
		p.limit = o.n
	case optPageBytes:
		p.bytes = o.n
	case optBackward:
		p.dir = Backward
	case optSealed:
		p.sealed = true
	default:
		p.pageSize = o.n
	}
}
func (o ReadOption) applyStream(so *streamOptions) { o.apply(&so.paging) }
func (o ReadOption) applyAll(ao *allOptions)       { o.apply(&ao.paging) }

// ReadBackward reads from the end towards the start: a stream from its
// last version (or from [From]) down, the global log from its newest
// event (or from before the position the read is given, when that is not
// [Start]) down.
func ReadBackward() ReadOption { return ReadOption{kind: optBackward} }

// Limit stops a read after n events; 0 means no limit. For
// [Store.ReadAllPage] it bounds the page.
func Limit(n int) ReadOption { return ReadOption{kind: optLimit, n: n} }

// PageSize sets how many events one backend round trip asks for; default
// the store's Config.PageSize.
func PageSize(n int) ReadOption { return ReadOption{kind: optPageSize, n: n} }

// PageBytes sets the byte budget of each page the Store reads from the
// backend: a page ends with the event that brings the sum of
// len(Data)+len(Metadata) of its events to n or beyond, so it holds at
// least one event whatever its size. 0 means the store's
// Config.MaxPageBytes; a negative n is [ErrInvalidArgument]. An iterator
// reads on while its pages are full by count or by bytes; a page of
// [Store.ReadAllPage] says which in [AllPage.Full].
func PageBytes(n int) ReadOption { return ReadOption{kind: optPageBytes, n: n} }

type streamOption func(*streamOptions)

func (f streamOption) applyStream(o *streamOptions) { f(o) }

// From starts a stream read at version v (inclusive).
func From(v Version) StreamOption {
	return streamOption(func(o *streamOptions) { o.from = v })
}

// paging is the bounds of a read: limit events in all (0: none), pages of
// pageSize events and of bytes bytes of event data; and its direction.
type paging struct {
	limit, pageSize, bytes int
	dir                    Direction
	sealed                 bool
}

type streamOptions struct {
	paging
	from Version
}

type allOptions struct {
	paging
	filter Filter
}

// pageLen is the length of one page of a read with o.
func (o allOptions) pageLen() int {
	if o.limit > 0 && o.limit < o.pageSize {
		return o.limit
	}
	return o.pageSize
}

func (s *Store) paging(p paging) (paging, error) {
	if p.pageSize == 0 {
		p.pageSize = s.cfg.PageSize
	}
	if p.bytes == 0 {
		p.bytes = s.cfg.MaxPageBytes
	}
	if p.limit < 0 || p.pageSize < 0 || p.bytes < 0 {
		return p, invalid("limit %d, page size %d, page bytes %d", p.limit, p.pageSize, p.bytes)
	}
	return p, nil
}

func (s *Store) streamOptions(opts []StreamOption) (streamOptions, error) {
	var o streamOptions
	for _, opt := range opts {
		opt.applyStream(&o)
	}
	var err error
	o.paging, err = s.paging(o.paging)
	return o, err
}

func (s *Store) allOptions(opts []AllOption) (allOptions, error) {
	var o allOptions
	for _, opt := range opts {
		opt.applyAll(&o)
	}
	var err error
	if o.paging, err = s.paging(o.paging); err == nil {
		err = o.filter.check()
	}
	return o, err
}

// page returns a buffer for pages of p and the size of one page. Pages up
// to the store's page size share its pool of buffers (a short page, such
// as an aggregate's read after its snapshot, uses the start of one); only
// larger ones are allocated.
func (s *Store) page(p paging) (*[]RecordedEvent, int) {
	n := p.pageSize
	if p.limit > 0 && p.limit < n {
		n = p.limit
	}
	if n <= s.cfg.PageSize {
		return s.pages.Get().(*[]RecordedEvent), n
	}
	b := make([]RecordedEvent, 0, n)
	return &b, n
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

// full reports whether page, read with a bound of n events and a budget of
// bytes bytes (0: none), stopped at one of them, so that more events may be
// readable at once.
func full(page []RecordedEvent, n, bytes int) bool {
	if len(page) >= n {
		return true
	}
	if bytes <= 0 {
		return false
	}
	for i := range page {
		if bytes -= page[i].Size(); bytes <= 0 {
			return true
		}
	}
	return false
}

// readPages is the paging loop of every iterator: fetch reads the page of
// at most n events and p.bytes bytes that follows what was read so far,
// next moves past the last event of a full page (false: nothing can follow
// it). It stops at a page that is not full, at the limit, when yield
// returns false, or at the first error, which it passes to fail.
func (s *Store) readPages(ctx context.Context, p paging, yield func(RecordedEvent, error) bool, fail func(error),
	fetch func(ctx context.Context, n int, buf []RecordedEvent) ([]RecordedEvent, error),
	next func(last *RecordedEvent) bool) {
	rctx, stop := s.readContext(ctx)
	defer stop()
	buf, n := s.page(p)
	used := 0
	defer func() { s.release(buf, used) }()
	left := p.limit
	for {
		if s.closed.Load() {
			fail(ErrClosed)
			return
		}
		want := n
		if left > 0 && left < n {
			want = left
		}
		page, err := fetch(rctx, want, (*buf)[:0])
		*buf, used = page[:0], max(used, len(page))
		if err == nil {
			err = s.open(rctx, p, page)
		}
		if err != nil {
			fail(readErr(rctx, err))
			return
		}
		for i := range page {
			if !yield(page[i], nil) {
				return
			}
		}
		if !full(page, want, p.bytes) {
			return
		}
		if left > 0 {
			if left -= len(page); left == 0 {
				return
			}
		}
		if !next(&page[len(page)-1]) {
			return
		}
	}
}

// ReadStream returns the events of stream, forward from its start unless
// options say otherwise. The iterator reads lazily, a page at a time, and
// stops after the first error. A stream that does not exist gives
// [ErrStreamNotFound]; a tombstoned one [ErrStreamDeleted]. Close ends a
// read in flight with [ErrClosed].
func (s *Store) ReadStream(ctx context.Context, stream string, opts ...StreamOption) iter.Seq2[RecordedEvent, error] {
	return func(yield func(RecordedEvent, error) bool) {
		fail := func(err error) { yield(RecordedEvent{}, fmt.Errorf("varve: read stream %q: %w", stream, err)) }
		err := s.ready(ctx)
		if err == nil {
			err = checkStream(stream, true)
		}
		o, oerr := s.streamOptions(opts)
		if err == nil {
			err = oerr
		}
		if err != nil {
			fail(err)
			return
		}
		q := StreamQuery{Stream: stream, Direction: o.dir, From: o.from, MaxBytes: o.bytes}
		s.readPages(ctx, o.paging, yield, fail,
			func(ctx context.Context, n int, buf []RecordedEvent) ([]RecordedEvent, error) {
				q.Limit = n
				if s.tr == nil {
					return s.b.ReadStream(ctx, q, buf)
				}
				return s.readTraced(ctx, TraceReadStartData{Op: opReadStream, Stream: stream, Direction: q.Direction, From: q.From, Limit: n, MaxBytes: q.MaxBytes}, len(buf),
					func(ctx context.Context) ([]RecordedEvent, error) { return s.b.ReadStream(ctx, q, buf) })
			},
			func(last *RecordedEvent) bool {
				if o.dir == Forward {
					q.From = last.Version + 1
					return true
				}
				q.From = last.Version - 1
				return last.Version > 1
			})
	}
}

// ReadAll returns the events of the global log after position after, in
// position order, a page at a time. With [ReadBackward] it returns them
// newest first: those before after, or from the newest when after is
// [Start]. Close ends a read in flight with [ErrClosed].
func (s *Store) ReadAll(ctx context.Context, after Position, opts ...AllOption) iter.Seq2[RecordedEvent, error] {
	return func(yield func(RecordedEvent, error) bool) {
		fail := func(err error) { yield(RecordedEvent{}, fmt.Errorf("varve: read $all: %w", err)) }
		err := s.ready(ctx)
		o, oerr := s.allOptions(opts)
		if err == nil {
			err = oerr
		}
		if err != nil {
			fail(err)
			return
		}
		if !o.filter.IsZero() {
			at := after
			s.readPages(ctx, o.paging, yield, fail,
				func(ctx context.Context, n int, buf []RecordedEvent) ([]RecordedEvent, error) {
					page, through, err := s.readFiltered(ctx, o.dir, at, n, o.bytes, o.filter, buf)
					at = through
					return page, err
				},
				func(*RecordedEvent) bool { return true })
			return
		}
		q := o.query(after, 0)
		s.readPages(ctx, o.paging, yield, fail,
			func(ctx context.Context, n int, buf []RecordedEvent) ([]RecordedEvent, error) {
				q.Limit = n
				return s.readAll(ctx, q, buf)
			},
			func(last *RecordedEvent) bool {
				q.After, q.Before = last.Position, last.Position
				return true
			})
	}
}

// query is the backend's query for a page of $all of n events from at.
func (o allOptions) query(at Position, n int) AllQuery {
	if o.dir == Backward {
		return AllQuery{Direction: Backward, Before: at, Limit: n, MaxBytes: o.bytes}
	}
	return AllQuery{After: at, Limit: n, MaxBytes: o.bytes}
}

// AllPage is one page of the global log.
type AllPage struct {
	// Events are the events read, in position order (newest first with
	// [ReadBackward]): buf extended.
	Events []RecordedEvent
	// Through is the position the read went through: the last event's, or
	// the position the read started after when the page is empty. A
	// filtered page that is not full goes through the events it passed
	// over, up to the end of what is readable now, so that a reader of a
	// sparse filter moves on. A reader that checkpoints page by page
	// resumes after it.
	Through Position
	// Full: the page stopped at its count of events or at its byte budget
	// ([PageBytes]), so more events may be readable after Through at once.
	// A page that is not full holds everything (that matches) readable
	// after the position it started after: a reader is caught up. A
	// backward page that is not full reached the start of the log; the
	// next backward page starts before Through.
	Full bool
}

// ReadAllPage reads one page of the global log after position after,
// appending at most [PageSize] events (or [Limit], if smaller) to buf, and
// no more than [PageBytes] bytes of event data (the event that reaches the
// budget included). It is the call under [Store.ReadAll], for readers that
// keep their own position page by page, such as package subscription.
// With a [Filter] it returns only matching events. A page that is not
// [AllPage.Full] means that nothing else (that matches) is readable after
// after yet. With [ReadBackward] the page holds the events before after
// (from the newest when after is [Start]), newest first.
func (s *Store) ReadAllPage(ctx context.Context, after Position, buf []RecordedEvent, opts ...AllOption) (AllPage, error) {
	page := AllPage{Events: buf, Through: after}
	err := s.ready(ctx)
	o, oerr := s.allOptions(opts)
	if err == nil {
		err = oerr
	}
	n := o.pageLen()
	if err == nil {
		rctx, stop := s.readContext(ctx)
		if o.filter.IsZero() {
			page.Events, err = s.readAll(rctx, o.query(after, n), buf)
			if k := len(page.Events); err == nil && k > len(buf) {
				page.Through = page.Events[k-1].Position
			}
		} else {
			page.Events, page.Through, err = s.readFiltered(rctx, o.dir, after, n, o.bytes, o.filter, buf)
		}
		if err == nil {
			err = s.open(rctx, o.paging, page.Events[len(buf):])
		}
		err = readErr(rctx, err)
		stop()
	}
	if err != nil {
		return AllPage{Events: buf, Through: after}, fmt.Errorf("varve: read $all after %s: %w", after, err)
	}
	page.Full = full(page.Events[len(buf):], n, o.bytes)
	return page, nil
}

// readAll reads a page of $all from the backend, traced.
func (s *Store) readAll(ctx context.Context, q AllQuery, buf []RecordedEvent) ([]RecordedEvent, error) {
	if s.tr == nil {
		return s.b.ReadAll(ctx, q, buf)
	}
	at := q.After
	if q.Direction == Backward {
		at = q.Before
	}
	return s.readTraced(ctx, TraceReadStartData{Op: opReadAll, Direction: q.Direction, After: at, Limit: q.Limit, MaxBytes: q.MaxBytes}, len(buf),
		func(ctx context.Context) ([]RecordedEvent, error) { return s.b.ReadAll(ctx, q, buf) })
}
