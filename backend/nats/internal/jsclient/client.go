// Package jsclient is the JetStream client under the NATS backend: the few
// requests an event store needs of one stream (publish with expectations,
// direct gets, batched gets, scans from a sequence, purges, message
// deletes), each bounded by the caller's context, by the client's Close
// and, when the context has no deadline, by a request timeout. It knows
// nothing of events; the backend's event-store layer (append, read, ids,
// lifecycle) is built on it, as pgx is on pgconn.
//
// A request fails at once when the connection is known to be down
// ([ErrUnreachable]), and while it waits when the connection drops.
//
// A Client is safe for concurrent use; a [Cursor] belongs to one goroutine
// at a time. The client starts no goroutines: replies reach it through
// subscriptions of the NATS connection, whose goroutines end with the
// subscriptions (Close) or the connection.
package jsclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Errors of the client. Failures carry the server's words or the transport
// error besides.
var (
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client closed")
	// ErrUnreachable: the connection to the server is down (nats.go is
	// reconnecting, or the connection was closed).
	ErrUnreachable = errors.New("server unreachable")
	// ErrNoBatch: the server does not answer batched direct gets (before
	// 2.11).
	ErrNoBatch = errors.New("server does not support batched direct gets")
	// ErrStalled: a scan got no message from the server for a request
	// timeout.
	ErrStalled = errors.New("scan stalled")
)

// Config configures a [Client].
type Config struct {
	// Stream is the JetStream stream the client works on.
	Stream string
	// Timeout bounds a request whose context has no deadline.
	Timeout time.Duration
}

// Client sends the requests of one JetStream stream over a NATS
// connection, which it does not own.
type Client struct {
	nc      *nats.Conn
	stream  string
	direct  string // direct get subject
	timeout time.Duration

	requests   atomic.Uint64
	passedOver atomic.Uint64
	restarts   atomic.Uint64
	returned   atomic.Uint64
	batch      atomic.Bool
	atomicPub  bool

	life context.Context // done when the client is closed
	kill context.CancelFunc

	mu        sync.Mutex
	prefix    string // reply subjects: prefix + token
	sub       *nats.Subscription
	replies   map[string]chan *nats.Msg
	token     uint64
	consumers map[string]bool // of open cursors
}

// New returns a client of cfg.Stream on nc. Batched direct gets are used if
// the server's version says it has them (2.11+).
func New(nc *nats.Conn, cfg Config) (*Client, error) {
	c := &Client{
		nc:        nc,
		stream:    cfg.Stream,
		direct:    "$JS.API.DIRECT.GET." + cfg.Stream,
		timeout:   cfg.Timeout,
		prefix:    nc.NewInbox() + ".",
		replies:   make(map[string]chan *nats.Msg),
		consumers: make(map[string]bool),
	}
	c.life, c.kill = context.WithCancel(context.Background())
	c.batch.Store(versionAtLeast(nc.ConnectedServerVersion(), 2, 11, 0))
	c.atomicPub = versionAtLeast(nc.ConnectedServerVersion(), 2, 12, 0)
	sub, err := nc.Subscribe(c.prefix+"*", c.reply)
	if err != nil {
		return nil, fmt.Errorf("subscribe to replies: %w", err)
	}
	c.sub = sub
	return c, nil
}

// Close makes every call in flight and every later call return ErrClosed,
// then deletes the consumers of cursors still open, waiting at most wait
// for the server's answers. It does not close the connection.
func (c *Client) Close(wait time.Duration) {
	c.kill()
	c.mu.Lock()
	sub, names := c.sub, c.consumers
	c.sub, c.consumers = nil, map[string]bool{}
	c.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	if len(names) == 0 || !c.nc.IsConnected() {
		return
	}
	ch := make(chan *nats.Msg, len(names))
	inbox, err := c.nc.ChanSubscribe(c.nc.NewInbox(), ch)
	if err != nil {
		return
	}
	defer func() { _ = inbox.Unsubscribe() }()
	sent := 0
	for name := range names {
		if c.nc.PublishRequest(c.deleteSubject(name), inbox.Subject, nil) == nil {
			sent++
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for range sent {
		select {
		case <-ch:
		case <-t.C:
			return // the inactivity threshold deletes the rest
		}
	}
}

func (c *Client) deleteSubject(consumer string) string {
	return "$JS.API.CONSUMER.DELETE." + c.stream + "." + consumer
}

// track records an open cursor's consumer, for Close; false after Close.
func (c *Client) track(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sub == nil {
		return false
	}
	c.consumers[name] = true
	return true
}

// untrack forgets a consumer; false when Close has taken it (and deletes
// it), true when the caller must have it deleted.
func (c *Client) untrack(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.consumers[name]
	delete(c.consumers, name)
	return ok
}

// Done is closed when the client is closed.
func (c *Client) Done() <-chan struct{} { return c.life.Done() }

// Requests is the number of requests that waited for a server reply.
func (c *Client) Requests() uint64 { return c.requests.Load() }

// CountRequest counts a request made outside the client (the jetstream
// library's stream and key-value calls).
func (c *Client) CountRequest() { c.requests.Add(1) }

// PassedOver is the number of messages that a consumer passed over and a
// cursor read by direct get instead (see [Cursor]).
func (c *Client) PassedOver() uint64 { return c.passedOver.Load() }

// Restarts is the number of consumers that cursors replaced because
// deliveries were lost (a queue overflowed, see maxQueued).
func (c *Client) Restarts() uint64 { return c.restarts.Load() }

// Returned is the number of messages that cursors and scans returned.
func (c *Client) Returned() uint64 { return c.returned.Load() }

// BatchGets reports whether the client uses batched direct gets.
func (c *Client) BatchGets() bool { return c.batch.Load() }

// AtomicBatches reports whether the server's version says it has atomic
// batch publishes ([Client.PublishBatch], 2.12+).
func (c *Client) AtomicBatches() bool { return c.atomicPub }

// DisableBatchGets makes the client read with consumers, as on servers
// before 2.11.
func (c *Client) DisableBatchGets() { c.batch.Store(false) }

// Ready returns ErrClosed after Close and an ErrUnreachable error while the
// connection is down.
func (c *Client) Ready() error {
	if c.life.Err() != nil {
		return ErrClosed
	}
	if !c.nc.IsConnected() {
		return fmt.Errorf("%w (connection %s)", ErrUnreachable, statusName(c.nc.Status()))
	}
	return nil
}

func statusName(s nats.Status) string {
	switch s {
	case nats.RECONNECTING:
		return "reconnecting"
	case nats.CLOSED:
		return "closed"
	case nats.DISCONNECTED:
		return "disconnected"
	case nats.CONNECTING:
		return "connecting"
	}
	return s.String()
}

// Bound returns ctx, also done when the client closes, with the request
// timeout when ctx has no deadline: for calls through the jetstream
// library. Errors of such calls go through [Client.Err].
func (c *Client) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if _, ok := ctx.Deadline(); ok {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	stop := context.AfterFunc(c.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// Err turns the error of a call made with a context from [Client.Bound]
// into ErrClosed when the client closed, and says so when the connection
// is down.
func (c *Client) Err(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case c.life.Err() != nil:
		return ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if rerr := c.Ready(); rerr != nil {
		return fmt.Errorf("%w: %w", rerr, err)
	}
	return err
}

// statusPoll is how often a request that waits for its reply looks at the
// connection's state.
const statusPoll = 100 * time.Millisecond

var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// waiter bounds one wait for replies: by ctx, the client's Close, the
// connection going down and, without a deadline in ctx, a timeout.
type waiter struct {
	c        *Client
	ctx      context.Context
	t        *time.Timer
	deadline time.Time // zero: ctx has one
	limit    time.Duration
}

func (c *Client) waiter(ctx context.Context, limit time.Duration) *waiter {
	w := &waiter{c: c, ctx: ctx, t: timers.Get().(*time.Timer), limit: limit}
	if _, ok := ctx.Deadline(); !ok {
		w.deadline = time.Now().Add(limit)
	}
	w.t.Reset(min(statusPoll, limit))
	return w
}

func (w *waiter) release() {
	w.t.Stop()
	timers.Put(w.t)
}

// restart gives the wait its full limit again (a scan that got a message).
func (w *waiter) restart() {
	if !w.deadline.IsZero() {
		w.deadline = time.Now().Add(w.limit)
	}
}

// block waits for a signal on ch, or says why none came.
func (w *waiter) block(ch <-chan struct{}) error {
	for {
		select {
		case <-ch:
			return nil
		case <-w.ctx.Done():
			return w.ctx.Err()
		case <-w.c.life.Done():
			return ErrClosed
		case <-w.t.C:
			if err := w.expired(); err != nil {
				return err
			}
		}
	}
}

// wait returns the next message on ch, or why there is none.
func (w *waiter) wait(ch <-chan *nats.Msg) (*nats.Msg, error) {
	for {
		select {
		case m := <-ch:
			return m, nil
		case <-w.ctx.Done():
			return nil, w.ctx.Err()
		case <-w.c.life.Done():
			return nil, ErrClosed
		case <-w.t.C:
			if err := w.expired(); err != nil {
				return nil, err
			}
		}
	}
}

// expired runs when the waiter's timer fires: it says whether the wait
// must end (the connection is down, or the timeout passed) and otherwise
// sets the timer again.
func (w *waiter) expired() error {
	if err := w.c.Ready(); err != nil {
		return err
	}
	if !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
		return fmt.Errorf("no reply within %v: %w", w.limit, nats.ErrTimeout)
	}
	w.t.Reset(statusPoll)
	return nil
}

// reply hands a reply to the request waiting for it.
func (c *Client) reply(m *nats.Msg) {
	token := m.Subject[len(c.prefix):]
	c.mu.Lock()
	ch := c.replies[token]
	delete(c.replies, token)
	c.mu.Unlock()
	if ch != nil {
		ch <- m // buffered, and this is its only send
	}
}

// request sends m and waits for its reply.
func (c *Client) request(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
	if err := c.Ready(); err != nil {
		return nil, err
	}
	c.requests.Add(1)
	ch := make(chan *nats.Msg, 1)
	c.mu.Lock()
	if c.sub == nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.token++
	token := strconv.FormatUint(c.token, 36)
	c.replies[token] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.replies, token)
		c.mu.Unlock()
	}()
	m.Reply = c.prefix + token
	if err := c.nc.PublishMsg(m); err != nil {
		return nil, c.sendErr(err)
	}
	w := c.waiter(ctx, c.timeout)
	defer w.release()
	r, err := w.wait(ch)
	if err != nil {
		return nil, err
	}
	if r.Header.Get("Status") == "503" {
		return nil, fmt.Errorf("%s: %w", m.Subject, nats.ErrNoResponders)
	}
	return r, nil
}

// sendErr explains a failed publish.
func (c *Client) sendErr(err error) error {
	if c.life.Err() != nil {
		return ErrClosed
	}
	if rerr := c.Ready(); rerr != nil {
		return rerr
	}
	return err
}

// api sends a JetStream API request with a JSON body and decodes the reply
// into resp.
func (c *Client) api(ctx context.Context, subject string, req, resp any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := c.request(ctx, &nats.Msg{Subject: "$JS.API." + subject, Data: data})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(r.Data, resp); err != nil {
		return fmt.Errorf("decode reply: %w", err)
	}
	return nil
}

// APIError is a JetStream API error: the server refused a request.
type APIError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("jetstream error %d (%d): %s", e.ErrCode, e.Code, e.Description)
}

// Error codes of a failed expected-last-(subject-)sequence check: 10071
// names the actual sequence; 10164, without one, is what a clustered
// stream's leader answers when another message on the subject is still
// being replicated (an append right after the one before it was
// acknowledged can meet it on R3), so it says nothing about the head.
const (
	errWrongLastSequence         = 10071
	errWrongLastSequenceConstant = 10164
)

// IsWrongLastSequence reports whether err is the server's refusal of a
// publish whose expected last subject sequence was not, or could not yet
// be checked against, the subject's: the caller reads the head again and
// retries.
func IsWrongLastSequence(err error) bool {
	var e *APIError
	return errors.As(err, &e) && (e.ErrCode == errWrongLastSequence || e.ErrCode == errWrongLastSequenceConstant)
}

// versionAtLeast reports whether a server version "major.minor.patch[-x]"
// is at least major.minor.patch.
func versionAtLeast(v string, major, minor, patch int) bool {
	var ma, mi, pa int
	if n, _ := fmt.Sscanf(v, "%d.%d.%d", &ma, &mi, &pa); n < 2 {
		return false
	}
	if ma != major {
		return ma > major
	}
	if mi != minor {
		return mi > minor
	}
	return pa >= patch
}

// SerialSubjectChecks reports whether the server checks the expected last
// subject sequence of publishes to a replicated stream one after the
// other: before 2.9.21 the leader checked each against the stored state
// only, so that concurrent publishes with the same expectation could all
// be stored (nats-server issue #4320).
func (c *Client) SerialSubjectChecks() bool {
	return versionAtLeast(c.nc.ConnectedServerVersion(), 2, 9, 21)
}
