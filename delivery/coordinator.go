package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/varve-go/varve"
)

type feedBatch struct {
	items   []*item
	through varve.Position
}

type result struct {
	it      *item
	err     error
	version varve.Version // of the parked stream, after a park
}

type unblock struct {
	stream  string
	version varve.Version // of the parked stream when it was seen resolved
}

type channels struct {
	feed    chan feedBatch
	readErr chan error
	work    chan job
	results chan result
	unblock chan unblock
}

// coordinator owns the dispatcher's state while Run runs: the stream
// queues, the ready and retry heaps and the list of pending events.
type coordinator struct {
	d       *Dispatcher
	streams map[string]*streamQueue
	ready   minHeap[*item] // may start now, by read order
	retries minHeap[*item] // wait for a retry, by due time

	oldest, newest *item // pending items in read order
	pending        int
	inFlight       int
	lastRead       varve.Position
	published      varve.Position
}

func (c *coordinator) loop(ctx context.Context, ch channels, stopReading, stopDelivering context.CancelFunc) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var (
		done     = ctx.Done()
		stopping bool
		drain    <-chan time.Time
		fatal    error
	)
	stop := func() {
		stopping, done = true, nil
		stopReading()
		drain = time.After(c.d.cfg.DrainTimeout)
	}
	for {
		if stopping && c.inFlight == 0 {
			return fatal
		}
		var feed <-chan feedBatch
		if !stopping && c.pending < c.d.cfg.Window {
			feed = ch.feed
		}
		var work chan<- job
		var next job
		if !stopping && c.ready.Len() > 0 {
			it := c.ready.Top()
			work, next = ch.work, job{it: it, attempt: it.attempts + 1}
		}
		var retryC <-chan time.Time
		if c.retries.Len() > 0 && !stopping {
			retryC = timer.C
		}
		select {
		case b := <-feed:
			for _, it := range b.items {
				c.add(it)
			}
			c.lastRead = b.through
			c.advance()
		case work <- next:
			c.ready.Pop()
			if it := next.it; !it.park {
				it.attempts = next.attempt
				if it.attempts == 1 {
					it.first = time.Now()
				}
				c.d.attempts.Add(1)
			}
			c.inFlight++
			c.d.inFlight.Store(int64(c.inFlight))
		case r := <-ch.results:
			c.inFlight--
			c.d.inFlight.Store(int64(c.inFlight))
			c.handle(r, stopping)
		case <-retryC:
			now := time.Now()
			for c.retries.Len() > 0 && !c.retries.Top().due.After(now) {
				c.ready.Push(c.retries.Pop())
			}
		case u := <-ch.unblock:
			c.unblock(u)
		case err := <-ch.readErr:
			fatal = fmt.Errorf("delivery: stopped: %w", err)
			stop()
		case <-done:
			stop()
		case <-drain:
			drain = nil
			stopDelivering()
		}
		if c.retries.Len() > 0 {
			timer.Reset(time.Until(c.retries.Top().due))
		}
	}
}

// add takes a newly read item.
func (c *coordinator) add(it *item) {
	if c.newest == nil {
		c.oldest = it
	} else {
		c.newest.newer, it.older = it, c.newest
	}
	c.newest = it
	c.pending++
	c.d.pending.Store(int64(c.pending))
	c.d.read.Add(1)
	if c.d.cfg.Ordering == Unordered {
		c.ready.Push(it)
		return
	}
	q := c.streams[it.ev.Stream]
	if q == nil {
		q = &streamQueue{name: it.ev.Stream}
		c.streams[it.ev.Stream] = q
	}
	it.q = q
	q.pending = append(q.pending, it)
	if q.current == nil {
		c.startNext(q)
	}
}

// startNext makes the next pending event of q ready.
func (c *coordinator) startNext(q *streamQueue) {
	if len(q.pending) == 0 {
		q.current, q.pending = nil, nil
		if !q.blocked {
			delete(c.streams, q.name)
		}
		return
	}
	it := q.pending[0]
	q.pending[0] = nil
	q.pending = q.pending[1:]
	q.current = it
	if q.blocked {
		c.toPark(it, ReasonStreamParked)
		return
	}
	c.ready.Push(it)
}

func (c *coordinator) toPark(it *item, reason string) {
	it.park = true
	it.record = ParkedEvent{
		Subscription: c.d.sub.Name(), Stream: it.ev.Stream, Version: it.ev.Version, Position: it.ev.Position,
		EventID: it.ev.ID, Type: it.ev.Type, Attempts: it.attempts, Reason: reason,
		FirstAttempt: it.first, ParkedAt: time.Now().UTC(),
	}
	if c.d.keepEvents {
		ev := it.ev
		it.record.Event = &ev
	}
	if it.lastErr != nil {
		it.record.Error = it.lastErr.Error()
	}
	c.ready.Push(it)
}

func (c *coordinator) handle(r result, stopping bool) {
	it := r.it
	switch {
	case r.err == nil && it.park:
		c.d.parkedN.Add(1)
		level := slog.LevelWarn
		if it.record.Reason == ReasonStreamParked {
			level = slog.LevelDebug
		}
		c.d.log.Log(context.Background(), level, "delivery: event parked", "stream", it.ev.Stream, "version", it.ev.Version,
			"position", it.ev.Position, "reason", it.record.Reason, "attempts", it.attempts, "err", it.record.Error)
		if q := it.q; q != nil {
			if !q.blocked {
				c.d.parkedStreams.Add(1)
			}
			q.blocked = true
			q.parkedVersion = r.version
		}
		c.done(it)
	case r.err == nil:
		c.d.delivered.Add(1)
		c.done(it)
	case stopping && errors.Is(r.err, context.Canceled):
		// Cut short by the shutdown: the event stays pending and is read
		// again after a restart.
	case it.park:
		// The store failed to keep the record: try again, never drop it.
		c.d.log.Warn("delivery: parking failed, retrying", "stream", it.ev.Stream, "version", it.ev.Version, "err", r.err)
		c.retryAt(it, time.Now().Add(c.d.cfg.Retry.Delay(2)))
	default:
		it.lastErr = r.err
		if IsPermanent(r.err) {
			c.toPark(it, ReasonRejected)
			return
		}
		pol := c.d.cfg.Retry
		delay := pol.Delay(it.attempts)
		if after := retryAfter(r.err); after > 0 {
			delay = after
		}
		due := time.Now().Add(delay)
		if pol.GiveUp(it.attempts, it.first, due) {
			c.toPark(it, ReasonExhausted)
			return
		}
		c.d.retries.Add(1)
		c.d.log.Debug("delivery: attempt failed, retrying", "stream", it.ev.Stream, "version", it.ev.Version,
			"attempt", it.attempts, "in", delay, "err", r.err)
		c.retryAt(it, due)
	}
}

func (c *coordinator) retryAt(it *item, due time.Time) {
	it.due = due
	c.retries.Push(it)
}

// done retires a delivered or parked item.
func (c *coordinator) done(it *item) {
	if it.older == nil {
		c.oldest = it.newer
	} else {
		it.older.newer = it.newer
	}
	if it.newer == nil {
		c.newest = it.older
	} else {
		it.newer.older = it.older
	}
	it.older, it.newer = nil, nil
	c.pending--
	c.d.pending.Store(int64(c.pending))
	if q := it.q; q != nil {
		it.q = nil
		c.startNext(q)
	}
	c.advance()
}

// advance publishes the end of the contiguous prefix of retired items.
func (c *coordinator) advance() {
	cp := c.lastRead
	if c.oldest != nil {
		cp = c.oldest.prev
	}
	if cp != c.published {
		c.published = cp
		c.d.publish(cp)
	}
}

// unblock lets a stream flow again once its parked events were resolved,
// unless it parked another event since the parked stream was read.
func (c *coordinator) unblock(u unblock) {
	q := c.streams[u.stream]
	if q == nil || !q.blocked || q.parkedVersion > u.version || q.current != nil && q.current.park {
		return
	}
	q.blocked = false
	c.d.parkedStreams.Add(-1)
	c.d.log.Info("delivery: parked stream resolved, delivering it again", "stream", q.name)
	if q.current == nil {
		delete(c.streams, q.name)
	}
}
