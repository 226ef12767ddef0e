package memory

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/varve-go/varve"
)

// ReadAllFiltered implements varve.FilteredReader: it merges the position
// ordered index lists of the filter's categories (or else of its types) and
// checks the rest of the filter on each event; a filter of stream prefixes
// alone scans the log.
func (b *Backend) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	if err := b.check(ctx); err != nil {
		return buf, varve.Position{}, err
	}
	l := &b.log
	l.mu.RLock()
	defer l.mu.RUnlock()
	f := q.Filter
	var lists [][]*record
	switch {
	case len(f.Categories) > 0:
		for _, c := range f.Categories {
			lists = append(lists, l.byCat[c])
		}
		f.Categories = nil
	case len(f.Types) > 0:
		for _, t := range f.Types {
			lists = append(lists, l.byType[t])
		}
		f.Types = nil
	default:
		lists = [][]*record{l.recs}
	}
	buf = merge(lists, q.After, newBudget(q.Limit, q.MaxBytes), func(r *record) bool { return match(r, f) }, buf)
	return buf, varve.Position{Seq: l.seq}, nil
}

// merge appends to buf the live records after after that keep accepts,
// while room is open, from lists in position order, merged by
// position; a record in several lists is taken once.
func merge(lists [][]*record, after varve.Position, room budget, keep func(*record) bool, buf []varve.RecordedEvent) []varve.RecordedEvent {
	next := make([]int, len(lists))
	for k, rs := range lists {
		next[k] = sort.Search(len(rs), func(i int) bool { return after.Less(rs[i].ev.Position) })
	}
	last := after
	for room.open() {
		best := -1
		for k, rs := range lists {
			if next[k] < len(rs) && (best < 0 || rs[next[k]].ev.Position.Less(lists[best][next[best]].ev.Position)) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		r := lists[best][next[best]]
		next[best]++
		if r.ev.Position == last {
			continue
		}
		last = r.ev.Position
		if !r.dead && keep(r) {
			buf = room.add(buf, &r.ev)
		}
	}
	return buf
}

func match(r *record, f varve.Filter) bool {
	if len(f.Categories) > 0 && !slices.Contains(f.Categories, r.cat) {
		return false
	}
	if len(f.Types) > 0 && !slices.Contains(f.Types, r.ev.Type) {
		return false
	}
	return len(f.StreamPrefixes) == 0 || slices.ContainsFunc(f.StreamPrefixes, func(p string) bool {
		return strings.HasPrefix(r.ev.Stream, p)
	})
}
