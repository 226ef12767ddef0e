package jsclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// A Cursor reads the messages of a subject filter in stream order, from a
// sequence on, across as many calls as its owner likes: with batched
// direct gets on servers from 2.11 on (no server state), otherwise with a
// push consumer that lives as long as the cursor (flow controlled: ack
// all, scanWindow in flight; memory storage; the server deletes it after
// an inactivity threshold if the process goes away).
//
// A cursor never passes over a message. Servers before 2.11 move a
// consumer whose filter is wider than a purged subject to that subject's
// first remaining message, past live messages of other subjects (the
// backend's deletes and truncations purge). So on a wildcard filter every
// jump in stream sequence is confirmed with a direct get of the filter's
// first message from the first sequence not yet returned, which depends
// on no consumer's state: when it finds a message before the jump, the
// cursor returns that message and goes on with a new consumer after it. A
// consumer of one subject moves only to that subject's first remaining
// message, past messages that the purge removed; its jumps need no check.
type Cursor struct {
	c      *Client
	filter string
	wild   bool
	// next is the first sequence at which a message of the filter may not
	// have been returned yet: every one below it was.
	next uint64
	want int  // messages to ask for in one batch
	grow bool // later batches ask for MaxBatch

	// Batched direct gets.
	batched bool
	b       *batch
	buf     []Msg
	ended   bool // the last batch reached the filter's last message

	// The consumer, when name is set.
	name    string
	sub     *nats.Subscription
	q       *queue
	pending uint64 // messages pending when it was created
	dseq    uint64 // last delivery sequence
	early   int    // heartbeats before its first delivery
	last    *nats.Msg
	unacked int
	active  time.Time // last delivery, ack or start of a wait
}

// Consumer scans: messages in flight, and how long the server waits
// before it says that it has nothing to deliver.
const (
	scanWindow    = 256
	idleHeartbeat = 100 * time.Millisecond
	// maxEarlyBeats bounds the idle heartbeats a consumer waits through
	// for its first message when it had messages pending: a busy 2.9
	// server sent heartbeats first.
	maxEarlyBeats = 20
	// inactiveThreshold is when the server deletes a consumer that nobody
	// listens to (its process died, or its delete was lost).
	inactiveThreshold = 30 * time.Second
)

// Cursor returns a cursor over filter from sequence from; want is how many
// messages the first batch asks for (0: MaxBatch). It holds nothing on the
// server until its first Next.
func (c *Client) Cursor(filter string, from uint64, want int) *Cursor {
	if want <= 0 || want > MaxBatch {
		want = MaxBatch
	}
	return &Cursor{c: c, filter: filter, wild: strings.ContainsAny(filter, "*>"), next: max(from, 1), want: want, batched: c.batch.Load()}
}

// Pos is the first sequence that the cursor has not returned.
func (k *Cursor) Pos() uint64 { return k.next }

// SetWant sets how many messages the next batches ask for.
func (k *Cursor) SetWant(n int) {
	if n > 0 {
		k.want = min(n, MaxBatch)
	}
}

// Refresh makes the next Next that finds no message at hand ask the
// server up to which message to read, instead of trusting that a batch of
// an earlier call reached the filter's last message: a reader that has
// learned of a later message since needs the cursor to see it.
func (k *Cursor) Refresh() { k.ended = false }

// Next returns the filter's next message. ok is false when there is none up
// to sequence end; with end 0, up to the filter's last message at the time
// (when messages are already at hand, Next returns them without asking).
// After an error the cursor can go on: it starts again from the first
// message it did not return.
func (k *Cursor) Next(ctx context.Context, end uint64) (Msg, bool, error) {
	if err := k.c.Ready(); err != nil {
		return Msg{}, false, err
	}
	if k.batched {
		m, ok, err := k.nextBatch(ctx, end)
		if !errors.Is(err, ErrNoBatch) {
			if ok {
				k.c.returned.Add(1)
			}
			return m, ok, err
		}
		k.batched = false
		k.closeBatch()
	}
	m, ok, err := k.nextConsumer(ctx, end)
	if err != nil {
		k.drop()
	}
	if ok {
		k.c.returned.Add(1)
	}
	return m, ok, err
}

func (k *Cursor) nextBatch(ctx context.Context, end uint64) (Msg, bool, error) {
	for {
		if len(k.buf) > 0 {
			m := k.buf[0]
			k.buf[0] = Msg{}
			k.buf = k.buf[1:]
			k.next = m.Seq + 1
			return m, true, nil
		}
		if end != 0 && k.next > end || k.ended {
			k.ended = false // the next call asks the server again
			return Msg{}, false, nil
		}
		if k.b == nil {
			b, err := k.c.openBatch(k.filter, MaxBatch)
			if err != nil {
				return Msg{}, false, err
			}
			k.b = b
		}
		if err := k.b.send(k.next, k.want, cursorBatchBytes); err != nil {
			k.closeBatch()
			return Msg{}, false, err
		}
		msgs, complete, err := k.b.read(ctx, k.buf[:0])
		if err != nil {
			k.closeBatch() // replies of this batch may still come
			return Msg{}, false, err
		}
		if len(msgs) == 0 && !complete {
			return Msg{}, false, fmt.Errorf("batched direct get: empty batch, more pending")
		}
		k.buf, k.ended = msgs, complete
		if k.grow {
			k.want = MaxBatch
		}
	}
}

func (k *Cursor) closeBatch() {
	if k.b != nil {
		k.b.close()
		k.b = nil
	}
	k.buf = nil
}

func (k *Cursor) nextConsumer(ctx context.Context, end uint64) (Msg, bool, error) {
	var w *waiter
	defer func() {
		if w != nil {
			w.release()
		}
	}()
	for {
		if end != 0 && k.next > end {
			return Msg{}, false, nil
		}
		var m *nats.Msg
		if k.name != "" {
			var lost bool
			if m, lost = k.q.pop(); lost {
				// The queue overflowed (a 2.9 purge let the consumer send
				// more than its window, or the messages are large): a new
				// consumer goes on from the first message not returned.
				k.c.restarts.Add(1)
				k.drop()
				continue
			}
		}
		if m == nil && end == 0 {
			// Nothing at hand: up to which message must the cursor wait?
			last, found, err := k.c.GetLast(ctx, k.filter)
			if err != nil {
				return Msg{}, false, err
			}
			if !found {
				return Msg{}, false, nil
			}
			end = last.Seq
			continue
		}
		if k.name == "" {
			if err := k.create(ctx); err != nil {
				return Msg{}, false, err
			}
			continue
		}
		if m == nil {
			if w == nil {
				w = k.c.waiter(ctx, k.c.timeout)
				k.active = time.Now()
			}
			if err := w.block(k.q.ready); err != nil {
				if errors.Is(err, nats.ErrTimeout) {
					err = fmt.Errorf("no message for %v: %w", k.c.timeout, ErrStalled)
				}
				return Msg{}, false, err
			}
			continue
		}
		if w != nil {
			w.restart()
		}
		if m.Header.Get("Status") == "100" {
			if w == nil {
				continue // sent before the cursor began to wait: it says nothing of now
			}
			msg, ok, done, err := k.idle(ctx, end)
			if done || err != nil {
				return msg, ok, err
			}
			continue
		}
		md, err := m.Metadata()
		if err != nil {
			return Msg{}, false, fmt.Errorf("consumer message: %w", err)
		}
		if md.Sequence.Consumer != k.dseq+1 {
			// Deliveries were lost on the way: a new consumer goes on
			// from the first message not returned.
			k.c.restarts.Add(1)
			k.drop()
			continue
		}
		k.dseq = md.Sequence.Consumer
		k.active = time.Now()
		k.track(m)
		seq := md.Sequence.Stream
		if seq < k.next {
			continue
		}
		if k.wild && seq > k.next {
			gm, found, err := k.c.GetNext(ctx, k.next, k.filter)
			if err != nil {
				return Msg{}, false, err
			}
			if found && gm.Seq < seq {
				return k.passedOver(gm), true, nil
			}
		}
		k.next = seq + 1
		return Msg{Seq: seq, Subject: m.Subject, Data: m.Data}, true, nil
	}
}

// idle handles an idle heartbeat: the consumer has nothing to deliver.
// Unless it waits for an ack, or the heartbeat is old, the cursor checks
// with a direct get that no message is stored from next to end: then it
// is done; if one is, the consumer passed over it (or has not begun to
// deliver: a busy server sends heartbeats first, so the cursor waits a few
// before it concludes that).
func (k *Cursor) idle(ctx context.Context, end uint64) (m Msg, ok, done bool, err error) {
	if time.Since(k.active) < idleHeartbeat/2 {
		return Msg{}, false, false, nil // sent before the last delivery or ack
	}
	if k.last != nil {
		_ = k.last.Ack()
		k.last, k.unacked = nil, 0
		k.active = time.Now()
		return Msg{}, false, false, nil
	}
	if k.dseq == 0 && k.pending > 0 && k.early < maxEarlyBeats {
		k.early++
		return Msg{}, false, false, nil
	}
	gm, found, err := k.c.GetNext(ctx, k.next, k.filter)
	if err != nil {
		return Msg{}, false, true, err
	}
	if !found || gm.Seq > end {
		return Msg{}, false, true, nil
	}
	return k.passedOver(gm), true, true, nil
}

// passedOver returns m, a message that the consumer passed over, and
// drops the consumer: the next one starts after m.
func (k *Cursor) passedOver(m Msg) Msg {
	k.c.passedOver.Add(1)
	k.drop()
	k.next = m.Seq + 1
	return m
}

// track acknowledges every scanWindow/4 deliveries, so that the consumer
// keeps up to scanWindow messages in flight.
func (k *Cursor) track(m *nats.Msg) {
	k.last = m
	if k.unacked++; k.unacked >= scanWindow/4 {
		_ = m.Ack()
		k.last, k.unacked = nil, 0
	}
}

// create makes the cursor's consumer, starting at next.
func (k *Cursor) create(ctx context.Context) error {
	q := newQueue()
	sub, err := k.c.nc.Subscribe(k.c.nc.NewInbox(), q.push)
	if err != nil {
		return k.c.sendErr(err)
	}
	cfg := consumerConfig{
		DeliverSubject:    sub.Subject,
		DeliverPolicy:     "all",
		AckPolicy:         "all",
		AckWait:           10 * time.Minute,
		MaxAckPending:     scanWindow,
		FilterSubject:     k.filter,
		ReplayPolicy:      "instant",
		InactiveThreshold: inactiveThreshold,
		IdleHeartbeat:     idleHeartbeat,
		MemoryStorage:     true,
		Replicas:          1,
	}
	if k.next > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = "by_start_sequence", k.next
	}
	// The cursor names its consumer and tracks the name before it asks
	// for it: a Close that interrupts the request still deletes it.
	name := consumerName()
	if !k.c.track(name) {
		_ = sub.Unsubscribe()
		return ErrClosed
	}
	cfg.Name = name
	var info struct {
		NumPending uint64    `json:"num_pending"`
		Error      *APIError `json:"error"`
	}
	req := struct {
		Stream string         `json:"stream_name"`
		Config consumerConfig `json:"config"`
	}{k.c.stream, cfg}
	err = k.c.api(ctx, "CONSUMER.CREATE."+k.c.stream+"."+name, req, &info)
	if err == nil && info.Error != nil {
		err = info.Error
	}
	if err != nil {
		_ = sub.Unsubscribe()
		if k.c.untrack(name) { // else Close deletes it
			// The request may have created it before ctx ended.
			_ = k.c.nc.PublishRequest(k.c.deleteSubject(name), k.c.nc.NewInbox(), nil)
		}
		return fmt.Errorf("create consumer: %w", err)
	}
	k.name, k.sub, k.q = name, sub, q
	k.pending, k.dseq, k.early, k.last, k.unacked = info.NumPending, 0, 0, nil, 0
	k.active = time.Now()
	return nil
}

// drop stops listening to the consumer and has the server delete it,
// without waiting for the answer (the inactivity threshold deletes it if
// the request is lost).
func (k *Cursor) drop() {
	if k.name == "" {
		return
	}
	_ = k.sub.Unsubscribe()
	if k.c.untrack(k.name) { // else Close deletes it
		_ = k.c.nc.PublishRequest(k.c.deleteSubject(k.name), k.c.nc.NewInbox(), nil)
	}
	k.name, k.sub, k.q = "", nil, nil
}

// Close releases the cursor and, when ctx allows, waits for the server to
// delete its consumer.
func (k *Cursor) Close(ctx context.Context) error {
	k.closeBatch()
	if k.name == "" {
		return nil
	}
	name := k.name
	_ = k.sub.Unsubscribe()
	k.name, k.sub, k.q = "", nil, nil
	if !k.c.untrack(name) {
		return nil // Close deletes it
	}
	var resp struct {
		Error *APIError `json:"error"`
	}
	if err := k.c.api(ctx, "CONSUMER.DELETE."+k.c.stream+"."+name, struct{}{}, &resp); err != nil {
		_ = k.c.nc.PublishRequest(k.c.deleteSubject(name), k.c.nc.NewInbox(), nil)
		return fmt.Errorf("delete consumer: %w", err)
	}
	if resp.Error != nil && resp.Error.Code != 404 {
		return fmt.Errorf("delete consumer: %w", resp.Error)
	}
	return nil
}

// Release lets the cursor go without waiting: its consumer is deleted by a
// request whose answer nobody waits for.
func (k *Cursor) Release() {
	k.closeBatch()
	k.drop()
}

// Scan calls fn with the messages of filter from sequence from on, in
// stream order, until fn returns false or the messages up to end (0: the
// filter's last message when the scan would wait) are read. want is how
// many messages the scan expects to need (0 if unknown). Nothing is left
// on the server when it returns.
func (c *Client) Scan(ctx context.Context, filter string, from, end uint64, want int, fn func(Msg) (bool, error)) (err error) {
	k := c.Cursor(filter, from, want)
	k.grow = true
	defer func() {
		if ctx.Err() != nil || c.life.Err() != nil {
			k.Release() // the inactivity threshold deletes what the request does not
		} else if cerr := k.Close(ctx); cerr != nil && err == nil && ctx.Err() == nil {
			err = cerr
		}
	}()
	for {
		m, ok, err := k.Next(ctx, end)
		if err != nil || !ok {
			return err
		}
		more, err := fn(m)
		if err != nil || !more || end != 0 && m.Seq >= end {
			return err
		}
	}
}

// A consumer's queue holds at most maxQueued messages (twice the
// consumer's window, which servers before 2.11 exceed after a purge moves
// the consumer) and maxQueuedBytes of data.
const (
	maxQueued      = 2 * scanWindow
	maxQueuedBytes = 32 << 20
)

// queue holds what a cursor's consumer delivered and the cursor has not
// read yet. It never holds two heartbeats in a row. When it is full it
// drops what comes, and says so once the messages it holds are read (the
// cursor then starts a new consumer): nats.go's channel subscriptions
// would report each drop to the connection's error handler, which the
// backend does not own.
type queue struct {
	mu    sync.Mutex
	msgs  []*nats.Msg
	bytes int
	lost  bool
	ready chan struct{} // a message came
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

func (q *queue) push(m *nats.Msg) {
	q.mu.Lock()
	switch {
	case q.lost:
	case len(q.msgs) >= maxQueued || q.bytes+len(m.Data) > maxQueuedBytes && len(q.msgs) > 0:
		q.lost = true
	case isHeartbeat(m) && len(q.msgs) > 0 && isHeartbeat(q.msgs[len(q.msgs)-1]):
	default:
		q.msgs = append(q.msgs, m)
		q.bytes += len(m.Data)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop returns the oldest message, nil if there is none; lost reports that
// messages were dropped after the last one the queue held.
func (q *queue) pop() (m *nats.Msg, lost bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 {
		return nil, q.lost
	}
	m = q.msgs[0]
	q.msgs[0] = nil
	q.msgs = q.msgs[1:]
	q.bytes -= len(m.Data)
	return m, false
}

func isHeartbeat(m *nats.Msg) bool { return len(m.Data) == 0 && m.Header.Get("Status") == "100" }

// consumerName returns a name no other consumer has.
func consumerName() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "varve_" + hex.EncodeToString(b[:])
}
