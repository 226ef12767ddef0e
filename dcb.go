package varve

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
)

// Limits of tags, the keys of Dynamic Consistency Boundaries.
const (
	MaxEventTags = 32
	MaxTagLen    = 256
	// MaxQueryItems bounds the items of a [Query].
	MaxQueryItems = 64
)

// ErrAppendConditionFailed: an event that matches the query of an
// append's condition was appended after the condition's position. The
// error is an [*AppendConditionError].
var ErrAppendConditionFailed = errors.New("append condition failed")

// AppendConditionError reports the event that failed an append's
// condition.
type AppendConditionError struct {
	// Position is the position of the first event after the condition's
	// position that matches its query.
	Position Position
}

func (e *AppendConditionError) Error() string {
	return fmt.Sprintf("append condition failed: a matching event at %s", e.Position)
}

// Is makes errors.Is(err, ErrAppendConditionFailed) true.
func (e *AppendConditionError) Is(target error) bool { return target == ErrAppendConditionFailed }

// QueryItem matches events whose type is one of Types (any type when
// empty) and that carry every one of Tags.
type QueryItem struct {
	Types []string
	Tags  []string
}

// Query matches events that match any of its items, as in the Dynamic
// Consistency Boundary specification (dcb.events). The zero Query, with
// no items, matches every event.
type Query struct {
	Items []QueryItem
}

// Match reports whether e matches q.
func (q Query) Match(e *RecordedEvent) bool {
	if len(q.Items) == 0 {
		return true
	}
	for _, it := range q.Items {
		if it.match(e) {
			return true
		}
	}
	return false
}

func (it QueryItem) match(e *RecordedEvent) bool {
	if len(it.Types) > 0 && !slices.Contains(it.Types, e.Type) {
		return false
	}
	for _, t := range it.Tags {
		if !slices.Contains(e.Tags, t) {
			return false
		}
	}
	return true
}

// Check reports whether q is a query the store takes: an error wrapping
// [ErrInvalidArgument] that says what is wrong, or nil.
func (q Query) Check() error { return q.check() }

func (q Query) check() error {
	if len(q.Items) > MaxQueryItems {
		return invalid("query of %d items, limit %d", len(q.Items), MaxQueryItems)
	}
	for i, it := range q.Items {
		if len(it.Types) == 0 && len(it.Tags) == 0 {
			return invalid("query item %d has neither types nor tags", i)
		}
		if len(it.Types) > MaxFilterValues || len(it.Tags) > MaxEventTags {
			return invalid("query item %d: %d types, %d tags; limits %d and %d", i, len(it.Types), len(it.Tags), MaxFilterValues, MaxEventTags)
		}
		for _, typ := range it.Types {
			if len(typ) == 0 || len(typ) > MaxEventTypeLen {
				return invalid("query item %d: type must be 1..%d bytes", i, MaxEventTypeLen)
			}
			if err := checkText("query type", typ); err != nil {
				return err
			}
		}
		if err := checkTags(it.Tags); err != nil {
			return invalid("query item %d: %v", i, err)
		}
	}
	return nil
}

func checkTags(tags []string) error {
	if len(tags) > MaxEventTags {
		return invalid("%d tags, limit %d", len(tags), MaxEventTags)
	}
	for _, t := range tags {
		if len(t) == 0 || len(t) > MaxTagLen {
			return invalid("tag must be 1..%d bytes, got %d", MaxTagLen, len(t))
		}
		if err := checkText("tag", t); err != nil {
			return err
		}
	}
	return nil
}

// AppendCondition makes an append fail when an event that matches
// FailIfEventsMatch was appended after After: the decision it carries was
// made on what the reader saw up to After.
type AppendCondition struct {
	FailIfEventsMatch Query
	After             Position
}

// QueryRequest asks a [TagStore] for one page of the events that match
// a query.
type QueryRequest struct {
	After Position
	Limit int
	Query Query
	// MaxBytes is the page's byte budget, as in [StreamQuery].
	MaxBytes int
}

// TagStore is the capability of a backend to keep the tags of events and
// to serve Dynamic Consistency Boundaries: reads of the events that match
// a query, and appends under a condition, checked and written atomically
// against every append whose events match the condition's query.
type TagStore interface {
	// ReadQuery appends to buf at most q.Limit events after q.After that
	// match q.Query, in position order, within q.MaxBytes, with the rule
	// and the through of [FilteredReader.ReadAllFiltered].
	ReadQuery(ctx context.Context, q QueryRequest, buf []RecordedEvent) (events []RecordedEvent, through Position, err error)
	// AppendIf is Append that fails with an [*AppendConditionError] when
	// an event that matches cond's query is after cond.After. A retry of a
	// committed append returns its result whatever the condition says.
	AppendIf(ctx context.Context, req AppendRequest, cond AppendCondition) (AppendResult, error)
}

// AppendIf appends events to stream like [Store.Append], and fails with an
// [*AppendConditionError] when an event that matches cond.FailIfEventsMatch
// is in the log after cond.After. The check and the append are atomic
// against other appends of matching events. Backends without [TagStore]
// give ErrNotSupported.
func (s *Store) AppendIf(ctx context.Context, stream string, expected ExpectedVersion, cond AppendCondition, events ...Event) (AppendResult, error) {
	err := s.ready(ctx)
	if err == nil && s.tags == nil {
		err = ErrNotSupported
	}
	if err == nil {
		err = s.checkAppend(stream, expected, events, false)
	}
	if err == nil {
		err = cond.FailIfEventsMatch.check()
	}
	if err != nil {
		return AppendResult{}, fmt.Errorf("varve: append to stream %q: %w", stream, err)
	}
	req := AppendRequest{Stream: stream, Expected: expected, Events: events, Category: s.Category(stream)}
	var res AppendResult
	if s.tr == nil {
		res, err = s.tags.AppendIf(ctx, req, cond)
	} else {
		res, err = s.appendTraced(ctx, opAppendIf, req, cond, func(ctx context.Context, req AppendRequest) (AppendResult, error) {
			return s.tags.AppendIf(ctx, req, cond)
		})
	}
	if err != nil {
		return AppendResult{}, fmt.Errorf("varve: append to stream %q: %w", stream, err)
	}
	return res, nil
}

// ReadQueryPage reads one page of the events after after that match q,
// appending them to buf; the page's bounds, Through and Full are as for a
// filtered [Store.ReadAllPage]. A reader that decides on what it read makes its
// append conditional on the same query after the last page's Through.
func (s *Store) ReadQueryPage(ctx context.Context, q Query, after Position, buf []RecordedEvent, opts ...AllOption) (AllPage, error) {
	o, err := s.allOptions(opts)
	if err == nil {
		err = s.ready(ctx)
	}
	if err == nil && s.tags == nil {
		err = ErrNotSupported
	}
	if err == nil {
		err = q.check()
	}
	page := AllPage{Events: buf, Through: after}
	if err == nil {
		rctx, stop := s.readContext(ctx)
		page.Events, page.Through, err = s.readQuery(rctx, after, o.pageLen(), o.bytes, q, buf)
		if err == nil {
			err = s.open(rctx, o.paging, page.Events[len(buf):])
		}
		err = readErr(rctx, err)
		stop()
	}
	if err != nil {
		return AllPage{Events: buf, Through: after}, fmt.Errorf("varve: read query after %s: %w", after, err)
	}
	page.Full = full(page.Events[len(buf):], o.pageLen(), o.bytes)
	return page, nil
}

// ReadQuery returns the events after after that match q, in position
// order, a page at a time.
func (s *Store) ReadQuery(ctx context.Context, q Query, after Position, opts ...AllOption) iter.Seq2[RecordedEvent, error] {
	return func(yield func(RecordedEvent, error) bool) {
		o, err := s.allOptions(opts)
		if err == nil {
			err = s.ready(ctx)
		}
		if err == nil && s.tags == nil {
			err = ErrNotSupported
		}
		if err == nil {
			err = q.check()
		}
		fail := func(err error) { yield(RecordedEvent{}, fmt.Errorf("varve: read query: %w", err)) }
		if err != nil {
			fail(err)
			return
		}
		pos := after
		s.readPages(ctx, o.paging, yield, fail,
			func(ctx context.Context, n int, buf []RecordedEvent) ([]RecordedEvent, error) {
				page, through, err := s.readQuery(ctx, pos, n, o.bytes, q, buf)
				pos = through
				return page, err
			},
			func(*RecordedEvent) bool { return true })
	}
}

// readQuery reads one page of at most n events and bytes bytes after
// after that match q. A page that is not full means that nothing else
// matches now; its through is then the position the backend read through,
// else its last event.
func (s *Store) readQuery(ctx context.Context, after Position, n, bytes int, q Query, buf []RecordedEvent) ([]RecordedEvent, Position, error) {
	start := len(buf)
	req := QueryRequest{After: after, Limit: n, Query: q, MaxBytes: bytes}
	var out []RecordedEvent
	var through Position
	var err error
	if s.tr == nil {
		out, through, err = s.tags.ReadQuery(ctx, req, buf)
	} else {
		out, err = s.readTraced(ctx, TraceReadStartData{Op: opReadQuery, After: after, Query: q, Limit: n, MaxBytes: bytes}, start,
			func(ctx context.Context) ([]RecordedEvent, error) {
				var out []RecordedEvent
				out, through, err = s.tags.ReadQuery(ctx, req, buf)
				return out, err
			})
	}
	if err != nil {
		return out, after, err
	}
	return out, pageThrough(after, through, out, start, n, bytes), nil
}
