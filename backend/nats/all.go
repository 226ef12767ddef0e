package nats

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// ReadAll implements varve.Backend. JetStream assigns sequences in commit
// order and delivers only stored messages, so a page never has a gap that
// a later commit could fill; the cursor under it never passes over a
// stored message (see jsclient.Cursor). The cursor of a page stays open
// for the page that starts where this one ended (cursorCache), so a reader
// that pages through $all keeps one consumer on servers before 2.11.
func (b *Backend) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	if err := b.ready(ctx); err != nil {
		return buf, err
	}
	if q.Limit <= 0 {
		return buf, nil
	}
	if err := b.refreshFloors(ctx); err != nil {
		return buf, b.fail("read floor entries", err)
	}
	if q.Direction == varve.Backward {
		start := len(buf)
		buf, err := b.readAllBackward(ctx, q, buf)
		if err != nil {
			return buf[:start], b.fail("", err)
		}
		return buf, nil
	}
	cur := b.cursors.take("", q.After)
	if cur == nil {
		cur = &allCursor{k: b.c.Cursor(b.allSubj, max(q.After.Commit, 1), q.Limit+1)}
	} else {
		cur.k.SetWant(q.Limit + 1)
	}
	start := len(buf)
	buf, err := b.page(ctx, cur, q, buf)
	if err != nil {
		cur.release()
		return buf[:start], b.fail("", err)
	}
	cur.at = q.After
	if len(buf) > start {
		cur.at = buf[len(buf)-1].Position
	}
	b.cursors.park(cur)
	return buf, nil
}

// readAllBackward appends the events of a backward page of $all: it scans
// windows of the log's messages forward, each window ending where the one
// before began and four times as long, keeping the newest q.Limit events
// of each, until the page is full or the first message was read.
func (b *Backend) readAllBackward(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	end := q.Before.Commit
	if q.Before.IsZero() {
		m, found, err := b.c.GetLast(ctx, b.allSubj)
		if err != nil || !found {
			return buf, err
		}
		end = m.Seq
	}
	start, bud := len(buf), newBudget(q.MaxBytes)
	var chunk []varve.RecordedEvent
	for w := uint64(max(q.Limit, 16)); end > 0 && len(buf)-start < q.Limit && !bud.spent(); w *= 4 {
		from := uint64(1)
		if end > w {
			from = end - w + 1
		}
		chunk = chunk[:0]
		err := b.c.Scan(ctx, b.allSubj, from, end, int(end-from+1), func(m jsclient.Msg) (bool, error) {
			if m.Seq > end {
				return false, nil
			}
			st, err := getState(m.Data)
			if err != nil {
				return false, fmt.Errorf("message %d: %w", m.Seq, err)
			}
			if !st.isCommit() {
				return true, nil
			}
			stream, _, err := b.streamOf(m.Subject)
			if err != nil {
				return false, fmt.Errorf("message %d on %q: %w", m.Seq, m.Subject, err)
			}
			p, gone, err := b.livePayload(ctx, m, st)
			if err != nil || gone {
				return err == nil, err
			}
			all := newBudget(0)
			if chunk, err = emit(chunk, p, stream, m.Seq, st, 0, b.floors.of(m.Seq), st.version, math.MaxInt, &all); err != nil {
				return false, err
			}
			for !q.Before.IsZero() && len(chunk) > 0 && !chunk[len(chunk)-1].Position.Less(q.Before) {
				chunk = chunk[:len(chunk)-1]
			}
			if n := len(chunk); n > 2*q.Limit {
				chunk = chunk[:copy(chunk, chunk[n-q.Limit:])]
			}
			return true, nil
		})
		if err != nil {
			return buf, err
		}
		for i := len(chunk) - 1; i >= 0 && len(buf)-start < q.Limit && !bud.spent(); i-- {
			buf = append(buf, chunk[i])
			bud.left -= chunk[i].Size()
		}
		end = from - 1
	}
	return buf, nil
}

// page appends to buf the events of q's page that cur reads: first those
// of the commit that the previous page ended in, if any. A page full by
// count or by bytes may end inside a commit: the next page reads its
// other events from cur.held.
func (b *Backend) page(ctx context.Context, cur *allCursor, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	end, bud := len(buf)+q.Limit, newBudget(q.MaxBytes)
	add := func(m jsclient.Msg) error {
		if m.Seq < q.After.Commit {
			return nil
		}
		st, err := getState(m.Data)
		if err != nil {
			return fmt.Errorf("message %d: %w", m.Seq, err)
		}
		if !st.isCommit() {
			return nil
		}
		minIdx := 0
		if m.Seq == q.After.Commit {
			minIdx = int(min(q.After.Seq+1, 1<<31))
		}
		stream, _, err := b.streamOf(m.Subject)
		if err != nil {
			return fmt.Errorf("message %d on %q: %w", m.Seq, m.Subject, err)
		}
		p, gone, err := b.livePayload(ctx, m, st)
		if err == nil && !gone {
			buf, err = emit(buf, p, stream, m.Seq, st, minIdx, b.floors.of(m.Seq), st.version, end, &bud)
		}
		return err
	}
	if held := cur.held; held.Seq != 0 {
		cur.held = jsclient.Msg{}
		if err := add(held); err != nil {
			return buf, err
		}
		if len(buf) == end || bud.spent() {
			cur.held = held
			return buf, nil
		}
	}
	for len(buf) < end && !bud.spent() {
		m, ok, err := cur.k.Next(ctx, 0)
		if err != nil || !ok {
			return buf, err
		}
		if err := add(m); err != nil {
			return buf, err
		}
		if len(buf) == end || bud.spent() {
			cur.held = m // it may have events after the page's last
		}
	}
	return buf, nil
}

// LastPosition implements varve.Backend.
func (b *Backend) LastPosition(ctx context.Context) (varve.Position, error) {
	if err := b.ready(ctx); err != nil {
		return varve.Start, err
	}
	m, found, err := b.c.GetLast(ctx, b.allSubj)
	if err != nil {
		return varve.Start, b.fail("", err)
	}
	if !found {
		return varve.Start, nil
	}
	h, err := parseHead(m)
	if err != nil {
		return varve.Start, b.fail("", err)
	}
	if h.st.isCommit() {
		return h.lastPos(), nil
	}
	// The log ends with a marker: find the last commit before it, scanning
	// ever larger windows backwards.
	end := m.Seq
	for w := uint64(64); end > 1; w *= 8 {
		from := uint64(1)
		if end > w {
			from = end - w
		}
		var last varve.Position
		err := b.c.Scan(ctx, b.allSubj, from, end-1, int(end-from), func(m jsclient.Msg) (bool, error) {
			if m.Seq >= end {
				return false, nil
			}
			if h, err := parseHead(m); err != nil {
				return false, err
			} else if h.st.isCommit() {
				last = h.lastPos()
			}
			return true, nil
		})
		if err != nil {
			return varve.Start, b.fail("", err)
		}
		if last != varve.Start || from == 1 {
			return last, nil
		}
		end = from
	}
	return varve.Start, nil
}

// Open $all cursors: at most maxCursors, each released after cursorIdle
// without a page.
const (
	maxCursors = 16
	cursorIdle = 5 * time.Second
)

// allCursor is the cursor of a reader of $all between two pages: k for
// ReadAll, mg for a filtered read (key names the filter).
type allCursor struct {
	key string
	k   *jsclient.Cursor
	mg  *merged
	// at is where the next page starts after: the position of the last
	// event returned, or where the last page began if it was empty.
	at varve.Position
	// held is the commit that the last page ended in, when the page was
	// full: events of it may follow at.
	held  jsclient.Msg
	timer *time.Timer
}

// cursorCache keeps the cursors of recent $all pages, keyed by the
// position that the next page starts after: a reader that asks for the
// page after the one it got reuses the cursor (on servers before 2.11, its
// consumer). Parked cursors are released after cursorIdle (a timer, whose
// function runs for as long as a release takes), the oldest one when
// there are maxCursors, and all on Close.
type cursorCache struct {
	mu     sync.Mutex
	parked []*allCursor
	closed bool
	idle   time.Duration // cursorIdle when 0 (tests shorten it)
}

func (c *allCursor) release() {
	if c.mg != nil {
		c.mg.release()
		return
	}
	c.k.Release()
}

// take removes a cursor of the reads named key parked at position at from
// the cache.
func (cc *cursorCache) take(key string, at varve.Position) *allCursor {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for i, c := range cc.parked {
		if c.at == at && c.key == key {
			cc.parked = append(cc.parked[:i], cc.parked[i+1:]...)
			c.timer.Stop()
			return c
		}
	}
	return nil
}

// park keeps c for the next page.
func (cc *cursorCache) park(c *allCursor) {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		c.release()
		return
	}
	var evicted *allCursor
	if len(cc.parked) >= maxCursors {
		evicted = cc.parked[0]
		cc.parked = append(cc.parked[:0], cc.parked[1:]...)
		evicted.timer.Stop()
	}
	cc.parked = append(cc.parked, c)
	idle := cc.idle
	if idle == 0 {
		idle = cursorIdle
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(idle, func() { cc.expire(c) })
	} else {
		c.timer.Reset(idle)
	}
	cc.mu.Unlock()
	if evicted != nil {
		evicted.release()
	}
}

// expire releases c if it is still parked.
func (cc *cursorCache) expire(c *allCursor) {
	cc.mu.Lock()
	for i, p := range cc.parked {
		if p == c {
			cc.parked = append(cc.parked[:i], cc.parked[i+1:]...)
			cc.mu.Unlock()
			c.release()
			return
		}
	}
	cc.mu.Unlock()
}

// close releases every parked cursor; cursors parked later are released
// at once.
func (cc *cursorCache) close() {
	cc.mu.Lock()
	parked := cc.parked
	cc.parked, cc.closed = nil, true
	cc.mu.Unlock()
	for _, c := range parked {
		c.timer.Stop()
		c.release()
	}
}

// open is the number of parked cursors.
func (cc *cursorCache) open() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return len(cc.parked)
}
