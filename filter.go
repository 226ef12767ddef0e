package varve

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// DefaultCategorySeparator ends the category part of a stream id: the
// category of "order-42" is "order".
const DefaultCategorySeparator = "-"

// MaxFilterValues bounds the values of each list of a [Filter].
const MaxFilterValues = 64

// Category returns the category of stream: the part of its id before the
// first separator, or the whole id when it has none ("order-42" is in
// "order", "order" too). The separator is [Config.CategorySeparator].
func (s *Store) Category(stream string) string {
	return category(stream, s.cfg.CategorySeparator)
}

func category(stream, sep string) string {
	if i := strings.Index(stream, sep); i >= 0 {
		return stream[:i]
	}
	return stream
}

// Filter selects events of the global log. An event matches when it
// matches every list that is not empty: its stream's category is one of
// Categories, its type one of Types, its stream id begins with one of
// StreamPrefixes. The zero Filter matches every event.
//
// A Filter is an [AllOption]: pass it to [Store.ReadAll] or
// [Store.ReadAllPage]. Backends that implement [FilteredReader] read only
// matching events, through indexes; on the others the Store filters pages
// of the log itself. Either way the events and their order are the same.
type Filter struct {
	Categories     []string
	Types          []string
	StreamPrefixes []string
}

func (f Filter) applyAll(o *allOptions) { o.filter = f }

// IsZero reports whether f matches every event.
func (f Filter) IsZero() bool {
	return len(f.Categories) == 0 && len(f.Types) == 0 && len(f.StreamPrefixes) == 0
}

// Match reports whether e matches f in a store whose categories end at sep.
func (f Filter) Match(e *RecordedEvent, sep string) bool {
	if len(f.Categories) > 0 && !slices.Contains(f.Categories, category(e.Stream, sep)) {
		return false
	}
	if len(f.Types) > 0 && !slices.Contains(f.Types, e.Type) {
		return false
	}
	if len(f.StreamPrefixes) > 0 && !slices.ContainsFunc(f.StreamPrefixes, func(p string) bool {
		return strings.HasPrefix(e.Stream, p)
	}) {
		return false
	}
	return true
}

func (f Filter) check() error {
	for _, l := range []struct {
		what string
		vs   []string
	}{{"category", f.Categories}, {"event type", f.Types}, {"stream prefix", f.StreamPrefixes}} {
		if len(l.vs) > MaxFilterValues {
			return invalid("filter: %d values of %s, limit %d", len(l.vs), l.what, MaxFilterValues)
		}
		for _, v := range l.vs {
			if len(v) == 0 || len(v) > MaxStreamIDLen {
				return invalid("filter: %s must be 1..%d bytes, got %d", l.what, MaxStreamIDLen, len(v))
			}
			if err := checkText("filter "+l.what, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// pushdown returns f as the Store hands it to a backend: lists sorted and
// without repeats, and the category implied by each stream prefix that
// holds the separator ("order-4" can only match streams of "order") added
// to Categories, so that backends can serve it from their category index.
// none is true when no event can match.
func (f Filter) pushdown(sep string) (q Filter, none bool) {
	q.Types = sortedSet(f.Types)
	q.Categories = sortedSet(f.Categories)
	if len(f.StreamPrefixes) == 0 {
		return q, false
	}
	implied := make([]string, 0, len(f.StreamPrefixes))
	for _, p := range f.StreamPrefixes {
		i := strings.Index(p, sep)
		if i < 0 {
			implied = nil
			break
		}
		implied = append(implied, p[:i])
	}
	prefixes := sortedSet(f.StreamPrefixes)
	if implied != nil {
		implied = sortedSet(implied)
		if len(q.Categories) > 0 {
			implied = slices.DeleteFunc(implied, func(c string) bool {
				_, found := slices.BinarySearch(q.Categories, c)
				return !found
			})
			prefixes = slices.DeleteFunc(prefixes, func(p string) bool {
				_, found := slices.BinarySearch(implied, category(p, sep))
				return !found
			})
			if len(prefixes) == 0 {
				return q, true
			}
		}
		q.Categories = implied
	}
	q.StreamPrefixes = prefixes
	return q, false
}

func sortedSet(vs []string) []string {
	if len(vs) == 0 {
		return nil
	}
	out := slices.Clone(vs)
	slices.Sort(out)
	return slices.Compact(out)
}

// FilterQuery asks a [FilteredReader] for one page of the matching events
// of the global log.
type FilterQuery struct {
	After  Position
	Limit  int
	Filter Filter
	// MaxBytes is the page's byte budget, as in [StreamQuery].
	MaxBytes int
}

// FilteredReader is the capability of a backend to read the events of the
// global log that match a [Filter] without reading the others, through
// indexes on categories and types. The Store hands it a validated filter
// whose lists are sorted and without repeats; the category of an event is
// [AppendRequest.Category] as it was appended.
type FilteredReader interface {
	// ReadAllFiltered appends to buf at most q.Limit matching events after
	// q.After, in position order, under the rule of ReadAll: no event is
	// returned before a position that may still commit later; it stops
	// after the event that reaches q.MaxBytes when that is set. When it
	// returns a page that is not full (fewer than q.Limit events, within
	// the budget) it also returns through: a position at or after every
	// event it could have returned and before every event that commits
	// later (as [Backend.LastPosition]), so that a sparse reader moves on;
	// with a full page, through is ignored. A backend that
	// cannot filter this store (a schema of an older version) returns
	// ErrNotSupported, and the Store filters full pages itself.
	ReadAllFiltered(ctx context.Context, q FilterQuery, buf []RecordedEvent) (events []RecordedEvent, through Position, err error)
}

// readFiltered reads one page of at most n events and a budget of bytes
// bytes (0: none) of the global log after after that match f (before it,
// from the end when it is Start, in dir Backward). A page that is not full
// means that nothing else matches now; through is then the position the
// read went through. Backward pages are filtered by the Store: the
// backends' indexes serve the readers that follow the log forward.
func (s *Store) readFiltered(ctx context.Context, dir Direction, after Position, n, bytes int, f Filter, buf []RecordedEvent) ([]RecordedEvent, Position, error) {
	q, none := f.pushdown(s.cfg.CategorySeparator)
	switch {
	case none && dir == Backward:
		return buf, after, nil
	case none:
		last, err := s.b.LastPosition(ctx)
		return buf, laterOf(after, last), err
	case dir == Backward:
		return s.scanFiltered(ctx, dir, after, n, bytes, f, buf)
	}
	if s.filtered != nil {
		start := len(buf)
		fq := FilterQuery{After: after, Limit: n, Filter: q, MaxBytes: bytes}
		var out []RecordedEvent
		var through Position
		var err error
		if s.tr == nil {
			out, through, err = s.filtered.ReadAllFiltered(ctx, fq, buf)
		} else {
			out, err = s.readTraced(ctx, TraceReadStartData{Op: opReadFiltered, After: after, Filter: q, Limit: n, MaxBytes: bytes}, start,
				func(ctx context.Context) ([]RecordedEvent, error) {
					var out []RecordedEvent
					out, through, err = s.filtered.ReadAllFiltered(ctx, fq, buf)
					return out, err
				})
		}
		if errors.Is(err, ErrNotSupported) {
			return s.scanFiltered(ctx, dir, after, n, bytes, f, buf[:start])
		}
		if err != nil {
			return out, after, err
		}
		return out, pageThrough(after, through, out, start, n, bytes), nil
	}
	return s.scanFiltered(ctx, dir, after, n, bytes, f, buf)
}

// scanFiltered filters pages of the global log until it has n matching
// events or bytes bytes of them (0: no budget), or reaches the end: the
// reference that the backends' filtered reads must agree with. A raw page
// asks for the matches still missing, so that a page of a dense filter
// ends where a raw page ended and the next read goes on from there
// (backends keep a cursor for a reader that pages on); its size doubles
// while the filter keeps missing, up to the store's page size. Raw pages
// have the same byte budget, so the scan holds at most twice the budget
// and two events. Backward, it reads the raw pages backward from after.
func (s *Store) scanFiltered(ctx context.Context, dir Direction, after Position, n, bytes int, f Filter, buf []RecordedEvent) ([]RecordedEvent, Position, error) {
	scratch, _ := s.page(paging{pageSize: s.cfg.PageSize})
	used := 0
	defer func() { s.release(scratch, used) }()
	start, size, left := len(buf), 0, bytes
	for {
		size = min(max(n-(len(buf)-start), 2*size), s.cfg.PageSize)
		q := AllQuery{After: after, Limit: size, MaxBytes: bytes}
		if dir == Backward {
			q = AllQuery{Direction: Backward, Before: after, Limit: size, MaxBytes: bytes}
		}
		page, err := s.readAll(ctx, q, (*scratch)[:0])
		*scratch, used = page[:0], max(used, len(page))
		if err != nil {
			return buf, after, err
		}
		for i := range page {
			e := &page[i]
			after = e.Position
			if f.Match(e, s.cfg.CategorySeparator) {
				buf = append(buf, *e)
				left -= e.Size()
				if len(buf)-start == n || bytes > 0 && left <= 0 {
					return buf, after, nil
				}
			}
		}
		if !full(page, size, bytes) {
			return buf, after, nil
		}
	}
}

// pageThrough is the through of a page of a capability's read that asked
// for n events and bytes bytes after after and appended out[start:]: the
// last event of a full page (where the backend's through is not asked
// for), else the backend's through, never before the last event or after.
func pageThrough(after, through Position, out []RecordedEvent, start, n, bytes int) Position {
	if k := len(out); k > start && (full(out[start:], n, bytes) || through.Less(out[k-1].Position)) {
		through = out[k-1].Position
	}
	return laterOf(after, through)
}

func laterOf(p, q Position) Position {
	if p.Less(q) {
		return q
	}
	return p
}
