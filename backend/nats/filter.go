package nats

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// maxMerged bounds the categories that a filtered read reads with a
// cursor each; a filter of more categories reads $all and checks them on
// each commit.
const maxMerged = 8

// ReadAllFiltered implements varve.FilteredReader. A filter of categories
// reads the subjects <prefix>.e.<category>.* (one cursor per category,
// merged by sequence), any other filter the whole of $all; event types and
// stream prefixes are checked on each commit, before its events are
// decoded where the subject decides.
//
// Through: before the page is read, the backend gets the last message of
// $all, L. Every message up to L was stored before the cursors ask the
// server where their subjects end, so a short page holds every matching
// event up to L, and every commit stored later comes after L.
//
// On a replicated stream, direct gets are answered by any replica, and a
// follower may lag: L can come from a replica that has commits the one
// answering a cursor has not applied yet. A replica holds a prefix of the
// stream, so one cursor's messages have no gap up to the last it returned,
// but L and the merge of several cursors (each perhaps from another
// replica) prove nothing. There a page goes through its own events only,
// and a filter of several categories reads $all with one cursor.
func (b *Backend) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	if err := b.ready(ctx); err != nil {
		return buf, q.After, err
	}
	if q.Limit <= 0 {
		return buf, q.After, nil
	}
	if err := b.refreshFloors(ctx); err != nil {
		return buf, q.After, b.fail("read floor entries", err)
	}
	last, err := b.lastMessage(ctx)
	if err != nil {
		return buf, q.After, b.fail("read the last message of $all", err)
	}
	subjects, pushed := b.filterSubjects(q.Filter)
	key := fmt.Sprintf("filter %q %q %q", q.Filter.Categories, q.Filter.Types, q.Filter.StreamPrefixes)
	cur := b.cursors.take(key, q.After)
	if cur == nil {
		cur = &allCursor{key: key, mg: b.newMerged(subjects, max(q.After.Commit, 1), q.Limit+1)}
	} else {
		cur.mg.refresh(q.Limit + 1)
	}
	cur.mg.bound = last.Commit
	start := len(buf)
	buf, err = b.filteredPage(ctx, cur, q, pushed, buf)
	if err != nil {
		cur.release()
		return buf[:start], q.After, b.fail("", err)
	}
	through := laterOf(q.After, last)
	if b.replicated {
		// L may come from a replica ahead of the one that answered the
		// cursor: go through the page's events only.
		through = q.After
	}
	if n := len(buf); n > start {
		through = laterOf(through, buf[n-1].Position)
		if n-start == q.Limit || spent(buf[start:], q.MaxBytes) {
			through = buf[n-1].Position
		}
	}
	cur.at = through
	b.cursors.park(cur)
	return buf, through, nil
}

// spent reports whether page reaches the byte budget maxBytes (0: none).
func spent(page []varve.RecordedEvent, maxBytes int) bool {
	if maxBytes <= 0 {
		return false
	}
	for i := range page {
		if maxBytes -= page[i].Size(); maxBytes <= 0 {
			return true
		}
	}
	return false
}

func laterOf(p, q varve.Position) varve.Position {
	if p.Less(q) {
		return q
	}
	return p
}

// lastMessage is the position of the last message of $all: the last event
// of a commit, or the message's sequence (event index 0) for a marker,
// which no event has.
func (b *Backend) lastMessage(ctx context.Context) (varve.Position, error) {
	m, found, err := b.c.GetLast(ctx, b.allSubj)
	if err != nil || !found {
		return varve.Start, err
	}
	h, err := parseHead(m)
	if err != nil {
		return varve.Start, err
	}
	if h.st.isCommit() {
		return h.lastPos(), nil
	}
	return varve.Position{Commit: m.Seq}, nil
}

// filterSubjects returns the subject filters that a read of f merges, and
// whether they select f's categories (else each commit's is checked).
func (b *Backend) filterSubjects(f varve.Filter) ([]string, bool) {
	if len(f.Categories) == 0 || len(f.Categories) > maxMerged || b.replicated && len(f.Categories) > 1 {
		return []string{b.allSubj}, false
	}
	subjs := make([]string, len(f.Categories))
	for i, c := range f.Categories {
		subjs[i] = b.categorySubject(c)
	}
	return subjs, true
}

// filteredPage appends to buf the matching events of q's page that cur
// reads: first those of the commit that the previous page ended in.
func (b *Backend) filteredPage(ctx context.Context, cur *allCursor, q varve.FilterQuery, pushed bool, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	f := q.Filter
	var catToks []string
	if !pushed {
		for _, c := range f.Categories {
			catToks = append(catToks, categoryToken(c))
		}
	}
	end, bud := len(buf)+q.Limit, newBudget(q.MaxBytes)
	add := func(m jsclient.Msg) (full bool, err error) {
		if m.Seq < q.After.Commit {
			return false, nil
		}
		st, err := getState(m.Data)
		if err != nil {
			return false, fmt.Errorf("message %d: %w", m.Seq, err)
		}
		if !st.isCommit() {
			return false, nil
		}
		stream, catTok, err := b.streamOf(m.Subject)
		if err != nil {
			return false, fmt.Errorf("message %d on %q: %w", m.Seq, m.Subject, err)
		}
		if catToks != nil && !slices.Contains(catToks, catTok) ||
			len(f.StreamPrefixes) > 0 && !slices.ContainsFunc(f.StreamPrefixes, func(p string) bool { return strings.HasPrefix(stream, p) }) {
			return false, nil
		}
		minIdx := 0
		if m.Seq == q.After.Commit {
			minIdx = int(min(q.After.Seq+1, 1<<31))
		}
		p, gone, err := b.livePayload(ctx, m, st)
		if err != nil || gone {
			return false, err
		}
		from := len(buf)
		none := budget{}
		if buf, err = emit(buf, p, stream, m.Seq, st, minIdx, b.floors.of(m.Seq), st.version, math.MaxInt, &none); err != nil {
			return false, err
		}
		if len(f.Types) > 0 {
			kept := from
			for i := from; i < len(buf); i++ {
				if slices.Contains(f.Types, buf[i].Type) {
					buf[kept] = buf[i]
					kept++
				}
			}
			clear(buf[kept:])
			buf = buf[:kept]
		}
		cut := min(len(buf), end)
		for i := from; i < cut && bud.on; i++ {
			if bud.left -= buf[i].Size(); bud.spent() {
				cut = i + 1
			}
		}
		if cut < len(buf) || len(buf) == end || bud.spent() {
			clear(buf[cut:])
			buf = buf[:cut]
			return true, nil
		}
		return false, nil
	}
	if held := cur.held; held.Seq != 0 {
		cur.held = jsclient.Msg{}
		full, err := add(held)
		if err != nil {
			return buf, err
		}
		if full {
			cur.held = held
			return buf, nil
		}
	}
	for len(buf) < end && !bud.spent() {
		m, ok, err := cur.mg.next(ctx)
		if err != nil || !ok {
			return buf, err
		}
		full, err := add(m)
		if err != nil {
			return buf, err
		}
		if full {
			cur.held = m // it may have matching events after the page's last
		}
	}
	return buf, nil
}

// merged reads the messages of several subject filters in stream order,
// with a cursor each (see jsclient.Cursor: none passes over a message).
//
// A cursor that says it has nothing more went up to its filter's last
// message when it asked, and that was after the page began; bound is the
// sequence of the last message of $all read before, so the cursor has
// returned every message of its filter up to bound. Messages of the other
// filters are then taken only up to bound: a later message of the silent
// filter may precede them.
type merged struct {
	ks    []*jsclient.Cursor
	peek  []jsclient.Msg // a message taken from ks[i] and not yet returned (Seq 0: none)
	quiet []bool         // ks[i] had nothing more during this page
	bound uint64
}

func (b *Backend) newMerged(subjects []string, from uint64, want int) *merged {
	mg := &merged{peek: make([]jsclient.Msg, len(subjects)), quiet: make([]bool, len(subjects))}
	for _, s := range subjects {
		mg.ks = append(mg.ks, b.c.Cursor(s, from, want))
	}
	return mg
}

// refresh prepares a parked merge for a new page.
func (mg *merged) refresh(want int) {
	for i, k := range mg.ks {
		k.SetWant(want)
		k.Refresh()
		mg.quiet[i] = false
	}
}

func (mg *merged) next(ctx context.Context) (jsclient.Msg, bool, error) {
	best, anyQuiet := -1, false
	for i, k := range mg.ks {
		if mg.peek[i].Seq == 0 && !mg.quiet[i] {
			m, ok, err := k.Next(ctx, 0)
			if err != nil {
				return jsclient.Msg{}, false, err
			}
			if ok {
				mg.peek[i] = m
			} else {
				mg.quiet[i] = true
			}
		}
		anyQuiet = anyQuiet || mg.quiet[i]
		if mg.peek[i].Seq != 0 && (best < 0 || mg.peek[i].Seq < mg.peek[best].Seq) {
			best = i
		}
	}
	if best < 0 || anyQuiet && mg.peek[best].Seq > mg.bound {
		return jsclient.Msg{}, false, nil
	}
	m := mg.peek[best]
	mg.peek[best] = jsclient.Msg{}
	return m, true, nil
}

func (mg *merged) release() {
	for _, k := range mg.ks {
		k.Release()
	}
}
