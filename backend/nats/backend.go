package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
)

// Backend is a varve.Backend on one JetStream stream. It is safe for
// concurrent use.
type Backend struct {
	cfg     Config
	nc      *natsgo.Conn
	ownConn bool
	js      jetstream.JetStream

	evPrefix  string // "<prefix>.e."
	chPrefix  string // "<prefix>.c."
	floorSubj string // "<prefix>.f"
	watchSubj string // "<prefix>.w.>"
	apiDirect string
	apiPrefix string // "$JS.API."

	maxPayload int
	batchGets  atomic.Bool // the server answers batched direct gets (2.11+)
	requests   atomic.Uint64
	closed     atomic.Bool

	headsMu sync.Mutex
	heads   map[string]head // stream id -> last known head
	hints   map[string]hint // stream id -> a commit to start scans at

	idSets *otter.Cache[string, *idSet] // stream id -> ids of its live events

	floorsMu  sync.Mutex
	floors    map[uint64]varve.Version // commit seq -> first visible version
	floorsSeq uint64                   // last floor entry read

	kvMu  sync.Mutex
	snaps jetstream.KeyValue
	ckpts jetstream.KeyValue

	watchMu  sync.Mutex
	watchSub *natsgo.Subscription
	watchCh  chan struct{}
}

var (
	_ varve.Backend         = (*Backend)(nil)
	_ varve.SnapshotStore   = (*Backend)(nil)
	_ varve.CheckpointStore = (*Backend)(nil)
	_ varve.Watcher         = (*Backend)(nil)
	_ varve.RequestCounter  = (*Backend)(nil)
)

// New connects (unless cfg.Conn is set), creates the JetStream stream if it
// does not exist and returns the backend.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:       cfg,
		nc:        cfg.Conn,
		evPrefix:  cfg.Prefix + ".e.",
		chPrefix:  cfg.Prefix + ".c.",
		floorSubj: cfg.Prefix + ".f",
		watchSubj: cfg.Prefix + ".w.>",
		apiDirect: "$JS.API.DIRECT.GET." + cfg.Stream,
		apiPrefix: "$JS.API.",
		heads:     make(map[string]head),
		hints:     make(map[string]hint),
		floors:    make(map[uint64]varve.Version),
		watchCh:   make(chan struct{}),
	}
	b.idSets, err = otter.New(&otter.Options[string, *idSet]{
		MaximumWeight: uint64(cfg.CachedEventIDs),
		Weigher:       func(_ string, s *idSet) uint32 { return s.weight.Load() },
		// Maintenance runs on the calling goroutine: the backend starts no
		// goroutines of its own.
		Executor: func(fn func()) { fn() },
	})
	if err != nil {
		return nil, fmt.Errorf("nats: id set cache: %w", err)
	}
	if b.nc == nil {
		opts := append([]natsgo.Option{natsgo.Name("varve"), natsgo.MaxReconnects(-1)}, cfg.Options...)
		if b.nc, err = natsgo.Connect(cfg.URL, opts...); err != nil {
			return nil, fmt.Errorf("nats: connect to %s: %w", cfg.URL, err)
		}
		b.ownConn = true
	}
	if b.js, err = jetstream.New(b.nc); err != nil {
		b.closeConn()
		return nil, fmt.Errorf("nats: jetstream context: %w", err)
	}
	b.maxPayload = int(b.nc.MaxPayload())
	b.batchGets.Store(versionAtLeast(b.nc.ConnectedServerVersion(), 2, 11))
	if err := b.ensureStream(ctx); err != nil {
		b.closeConn()
		return nil, err
	}
	return b, nil
}

func (b *Backend) streamConfig() jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if b.cfg.MemoryStorage {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:        b.cfg.Stream,
		Description: "varve event store",
		Subjects:    []string{b.evPrefix + ">", b.chPrefix + ">", b.floorSubj},
		Retention:   jetstream.LimitsPolicy,
		Storage:     storage,
		Replicas:    b.cfg.Replicas,
		Duplicates:  b.cfg.DuplicateWindow,
		AllowDirect: true,
		RePublish: &jetstream.RePublish{
			Source:      b.evPrefix + ">",
			Destination: b.cfg.Prefix + ".w.>",
			HeadersOnly: true,
		},
	}
}

// ensureStream creates the stream, or checks an existing one and adds
// direct gets and the headers-only republish that Watch relies on.
func (b *Backend) ensureStream(ctx context.Context) error {
	want := b.streamConfig()
	b.requests.Add(1)
	s, err := b.js.Stream(ctx, b.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		b.requests.Add(1)
		_, err = b.js.CreateStream(ctx, want)
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("nats: create stream %s: %w", b.cfg.Stream, err)
		}
		if err == nil {
			return nil
		}
		b.requests.Add(1)
		s, err = b.js.Stream(ctx, b.cfg.Stream)
	}
	if err != nil {
		return fmt.Errorf("nats: look up stream %s: %w", b.cfg.Stream, err)
	}
	have := s.CachedInfo().Config
	subjects := map[string]bool{}
	for _, subj := range have.Subjects {
		subjects[subj] = true
	}
	for _, subj := range want.Subjects {
		if !subjects[subj] {
			return fmt.Errorf("nats: stream %s exists without subject %q (has %v): %w",
				b.cfg.Stream, subj, have.Subjects, varve.ErrInvalidArgument)
		}
	}
	if have.AllowDirect && have.RePublish != nil && *have.RePublish == *want.RePublish {
		return nil
	}
	have.AllowDirect = true
	have.RePublish = want.RePublish
	b.requests.Add(1)
	if _, err := b.js.UpdateStream(ctx, have); err != nil {
		return fmt.Errorf("nats: enable direct gets and republish on stream %s: %w", b.cfg.Stream, err)
	}
	return nil
}

// Features implements varve.Backend.
func (b *Backend) Features() varve.Features {
	return varve.Features{
		Name:           "nats",
		Durable:        !b.cfg.MemoryStorage,
		UniqueEventIDs: true,
		Snapshots:      true,
		Checkpoints:    true,
		Watch:          true,
	}
}

// Requests implements varve.RequestCounter: the number of requests that
// waited for a server reply (publishes, gets, consumer and stream API calls).
func (b *Backend) Requests() uint64 { return b.requests.Load() }

// Conn returns the backend's NATS connection.
func (b *Backend) Conn() *natsgo.Conn { return b.nc }

// Close implements varve.Backend. It closes the connection if the backend
// opened it.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.watchMu.Lock()
	if b.watchSub != nil {
		_ = b.watchSub.Unsubscribe()
		b.watchSub = nil
	}
	b.watchMu.Unlock()
	b.closeConn()
	return nil
}

func (b *Backend) closeConn() {
	if b.ownConn {
		b.nc.Close()
	}
}

func (b *Backend) ready(ctx context.Context) error {
	if b.closed.Load() {
		return varve.ErrClosed
	}
	return ctx.Err()
}

// request sends m and waits for the reply, bounded by ctx and, when ctx has
// no deadline, by the configured request timeout.
func (b *Backend) request(ctx context.Context, m *natsgo.Msg) (*natsgo.Msg, error) {
	if b.closed.Load() {
		return nil, varve.ErrClosed
	}
	b.requests.Add(1)
	rctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, b.cfg.RequestTimeout)
		defer cancel()
	}
	r, err := b.nc.RequestMsgWithContext(rctx, m)
	if err == nil {
		return r, nil
	}
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case rctx.Err() != nil:
		return nil, fmt.Errorf("no reply within %v: %w", b.cfg.RequestTimeout, natsgo.ErrTimeout)
	case b.closed.Load():
		return nil, varve.ErrClosed
	}
	return nil, err
}

func (b *Backend) api(ctx context.Context, subj string, req any, resp any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := b.request(ctx, &natsgo.Msg{Subject: b.apiPrefix + subj, Data: data})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(r.Data, resp); err != nil {
		return fmt.Errorf("decode reply to %s: %w", subj, err)
	}
	return nil
}

// apiError is a JetStream API error.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("jetstream error %d (%d): %s", e.ErrCode, e.Code, e.Description)
}

// errWrongLastSequence is the JetStream error code of a failed
// expected-last-subject-sequence check.
const errWrongLastSequence = 10071

type pubAck struct {
	Seq       uint64    `json:"seq"`
	Duplicate bool      `json:"duplicate"`
	Error     *apiError `json:"error"`
}

// publish stores m in the stream. Transport failures are returned as err,
// refusals of the server as ack.Error.
func (b *Backend) publish(ctx context.Context, m *natsgo.Msg) (pubAck, error) {
	r, err := b.request(ctx, m)
	if err != nil {
		return pubAck{}, err
	}
	var ack pubAck
	if err := json.Unmarshal(r.Data, &ack); err != nil {
		return pubAck{}, fmt.Errorf("decode publish ack %q: %w", r.Data, err)
	}
	if ack.Error == nil && ack.Seq == 0 {
		return pubAck{}, fmt.Errorf("publish ack without sequence: %q", r.Data)
	}
	return ack, nil
}

// rawMsg is a stored message.
type rawMsg struct {
	seq     uint64
	subject string
	data    []byte
}

// directGet asks for one message; found is false when there is none.
func (b *Backend) directGet(ctx context.Context, req string) (rawMsg, bool, error) {
	r, err := b.request(ctx, &natsgo.Msg{Subject: b.apiDirect, Data: []byte(req)})
	if err != nil {
		return rawMsg{}, false, err
	}
	if st := r.Header.Get("Status"); st != "" {
		if st == "404" {
			return rawMsg{}, false, nil
		}
		return rawMsg{}, false, fmt.Errorf("direct get %s: status %s %s", req, st, r.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(r.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return rawMsg{}, false, fmt.Errorf("direct get %s: bad sequence header: %w", req, err)
	}
	return rawMsg{seq: seq, subject: r.Header.Get("Nats-Subject"), data: r.Data}, true, nil
}

func (b *Backend) getSeq(ctx context.Context, seq uint64) (rawMsg, bool, error) {
	return b.directGet(ctx, `{"seq":`+strconv.FormatUint(seq, 10)+`}`)
}

func (b *Backend) getLast(ctx context.Context, subject string) (rawMsg, bool, error) {
	return b.directGet(ctx, `{"last_by_subj":"`+subject+`"}`)
}

func (b *Backend) getNext(ctx context.Context, seq uint64, subject string) (rawMsg, bool, error) {
	return b.directGet(ctx, `{"seq":`+strconv.FormatUint(seq, 10)+`,"next_by_subj":"`+subject+`"}`)
}

// purge removes the messages of subject with sequences below before.
func (b *Backend) purge(ctx context.Context, subject string, before uint64) error {
	if before <= 1 {
		return nil // server 2.9 reads a purge below 1 as a purge of everything
	}
	var resp struct {
		Success bool      `json:"success"`
		Error   *apiError `json:"error"`
	}
	req := struct {
		Filter string `json:"filter"`
		Seq    uint64 `json:"seq"`
	}{subject, before}
	if err := b.api(ctx, "STREAM.PURGE."+b.cfg.Stream, req, &resp); err != nil {
		return fmt.Errorf("purge %s below %d: %w", subject, before, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("purge %s below %d: %w", subject, before, resp.Error)
	}
	return nil
}

func (b *Backend) deleteMsg(ctx context.Context, seq uint64) error {
	var resp struct {
		Error *apiError `json:"error"`
	}
	req := struct {
		Seq     uint64 `json:"seq"`
		NoErase bool   `json:"no_erase"`
	}{seq, true}
	if err := b.api(ctx, "STREAM.MSG.DELETE."+b.cfg.Stream, req, &resp); err != nil {
		return fmt.Errorf("delete message %d: %w", seq, err)
	}
	if resp.Error != nil && resp.Error.Code != 404 {
		return fmt.Errorf("delete message %d: %w", seq, resp.Error)
	}
	return nil
}

// cleanupCtx bounds clean-up work that must run even when the caller's
// context is already done.
func (b *Backend) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), b.cfg.RequestTimeout)
}

var errStalled = errors.New("consumer delivery stalled")

// scanStart is where a scan begins: a stream sequence or, if set, a time.
type scanStart struct {
	seq  uint64
	time time.Time
	// want is how many messages the scan expects to need, 0 if unknown.
	want int
	// end, if not 0, is the sequence of the filter's last message when the
	// scan began: the scan stops there. Without it, a scan ends when the
	// server says nothing is pending; server 2.9 can say so too early for
	// a wildcard filter after purges, so scans over $all pass end.
	end uint64
}

// done reports whether a scan has seen the last message it must read.
func (s scanStart) done(seq, pending uint64) bool {
	if s.end != 0 {
		return seq >= s.end
	}
	return pending == 0
}

// scanMsg is one message delivered to a scan.
type scanMsg struct {
	rawMsg
	pending uint64 // messages after this one that match the filter
}

const scanWindow = 256 // messages in flight per consumer scan

// idleHeartbeat is how long a consumer scan waits, once messages stop,
// before the server tells it that nothing is left to deliver.
const idleHeartbeat = 100 * time.Millisecond

// maxEarlyBeats bounds the idle heartbeats a scan waits through for the
// first message of a consumer that has messages pending: 2 s.
const maxEarlyBeats = 20

// scan delivers the messages of filter from start, in stream order, to fn
// until fn returns false or the messages that existed when the scan began
// are exhausted. Servers from 2.11 on answer batched direct gets; older
// ones are read with a consumer.
func (b *Backend) scan(ctx context.Context, filter string, start scanStart, fn func(scanMsg) (bool, error)) error {
	if b.batchGets.Load() {
		err := b.scanBatch(ctx, filter, start, fn)
		if !errors.Is(err, errNoBatch) {
			return err
		}
		b.batchGets.Store(false)
	}
	return b.scanConsumer(ctx, filter, start, fn)
}

// errNoBatch: the server answered a batched direct get with one plain
// message, as servers before 2.11 do; nothing was delivered to fn yet.
var errNoBatch = errors.New("server does not support batched direct gets")

// maxBatch bounds the messages of one batched direct get.
const maxBatch = 1024

// batchRequest is the body of a batched direct get.
type batchRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	NextFor   string     `json:"next_by_subj"`
	Batch     int        `json:"batch"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

// sendBatch publishes one batched direct get whose replies go to inbox.
func (b *Backend) sendBatch(inbox string, req batchRequest) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	b.requests.Add(1)
	if err := b.nc.PublishRequest(b.apiDirect, inbox, data); err != nil {
		return fmt.Errorf("batched direct get: %w", err)
	}
	return nil
}

// nextReply waits for the next reply of a batched direct get on subject,
// for at most the request timeout.
func (b *Backend) nextReply(ctx context.Context, ch <-chan *natsgo.Msg, stall *time.Timer, subject string) (*natsgo.Msg, error) {
	select {
	case m := <-ch:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-stall.C:
		return nil, fmt.Errorf("batched direct get on %s: no reply for %v: %w", subject, b.cfg.RequestTimeout, errStalled)
	}
}

// batchMsg decodes a message reply of a batched direct get; ok is false
// when it carries no pending count, as replies of servers before 2.11 do.
func batchMsg(m *natsgo.Msg, subject string) (msg rawMsg, pending uint64, ok bool, err error) {
	pendingHdr := m.Header.Get("Nats-Num-Pending")
	if pendingHdr == "" {
		return rawMsg{}, 0, false, nil
	}
	seq, err1 := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	pending, err2 := strconv.ParseUint(pendingHdr, 10, 64)
	if err1 != nil || err2 != nil {
		return rawMsg{}, 0, true, fmt.Errorf("batched direct get on %s: bad headers %v", subject, m.Header)
	}
	return rawMsg{seq: seq, subject: m.Header.Get("Nats-Subject"), data: m.Data}, pending, true, nil
}

// scanBatch reads with batched direct gets: one request per batch of up to
// maxBatch messages, no server state.
func (b *Backend) scanBatch(ctx context.Context, filter string, start scanStart, fn func(scanMsg) (bool, error)) error {
	if b.closed.Load() {
		return varve.ErrClosed
	}
	inbox := b.nc.NewInbox()
	ch := make(chan *natsgo.Msg, maxBatch+8)
	sub, err := b.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	stall := time.NewTimer(b.cfg.RequestTimeout)
	defer stall.Stop()
	seq, at := max(start.seq, 1), start.time
	batch := maxBatch
	if start.want > 0 {
		batch = min(start.want, maxBatch)
	}
	delivered := false
request:
	for {
		req := batchRequest{Seq: seq, NextFor: filter, Batch: batch}
		if !at.IsZero() {
			req.Seq, req.StartTime, at = 0, &at, time.Time{}
		}
		if err := b.sendBatch(inbox, req); err != nil {
			return err
		}
		for {
			stall.Reset(b.cfg.RequestTimeout)
			m, err := b.nextReply(ctx, ch, stall, filter)
			if err != nil {
				return err
			}
			switch status := m.Header.Get("Status"); status {
			case "":
			case "404":
				return nil
			case "204": // end of batch
				if m.Header.Get("Nats-Num-Pending") == "0" {
					return nil
				}
				last, err := strconv.ParseUint(m.Header.Get("Nats-Last-Sequence"), 10, 64)
				if err != nil || last < seq {
					return fmt.Errorf("batched direct get on %s: bad end of batch %v", filter, m.Header)
				}
				seq, batch = last+1, maxBatch
				continue request
			default:
				return fmt.Errorf("batched direct get on %s: status %s %s", filter, status, m.Header.Get("Description"))
			}
			msg, pending, ok, err := batchMsg(m, filter)
			switch {
			case err != nil:
				return err
			case !ok && !delivered:
				return errNoBatch
			case !ok:
				return fmt.Errorf("batched direct get on %s: reply without pending count", filter)
			}
			delivered = true
			more, err := fn(scanMsg{msg, pending})
			if err != nil || !more || start.done(msg.seq, pending) {
				return err
			}
		}
	}
}

// getBatch reads up to n messages of subject from sequence from with one
// batched direct get. complete is true when the server said that no
// message of the subject follows the last one returned (or that there is
// none from from on): the batch then ends at the subject's last message.
func (b *Backend) getBatch(ctx context.Context, subject string, from uint64, n int) (msgs []rawMsg, complete bool, err error) {
	if b.closed.Load() {
		return nil, false, varve.ErrClosed
	}
	inbox := b.nc.NewInbox()
	ch := make(chan *natsgo.Msg, n+8)
	sub, err := b.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, false, fmt.Errorf("subscribe %s: %w", inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := b.sendBatch(inbox, batchRequest{Seq: max(from, 1), NextFor: subject, Batch: n}); err != nil {
		return nil, false, err
	}
	stall := time.NewTimer(b.cfg.RequestTimeout)
	defer stall.Stop()
	for {
		m, err := b.nextReply(ctx, ch, stall, subject)
		if err != nil {
			return nil, false, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "404":
			return msgs, len(msgs) == 0, nil
		case "204": // end of batch
			return msgs, m.Header.Get("Nats-Num-Pending") == "0", nil
		default:
			return nil, false, fmt.Errorf("batched direct get on %s: status %s %s", subject, status, m.Header.Get("Description"))
		}
		msg, _, ok, err := batchMsg(m, subject)
		switch {
		case err != nil:
			return nil, false, err
		case !ok && len(msgs) == 0:
			b.batchGets.Store(false)
			return nil, false, errNoBatch
		case !ok:
			return nil, false, fmt.Errorf("batched direct get on %s: reply without pending count", subject)
		}
		msgs = append(msgs, msg)
		stall.Reset(b.cfg.RequestTimeout)
	}
}

// scanConsumer reads with a short-lived push consumer that is flow
// controlled (ack all, scanWindow in flight) and deleted before it returns:
// nothing is left on the server.
func (b *Backend) scanConsumer(ctx context.Context, filter string, start scanStart, fn func(scanMsg) (bool, error)) (err error) {
	if b.closed.Load() {
		return varve.ErrClosed
	}
	inbox := b.nc.NewInbox()
	ch := make(chan *natsgo.Msg, scanWindow+8)
	sub, err := b.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	cfg := consumerConfig{
		DeliverSubject:    inbox,
		DeliverPolicy:     "all",
		AckPolicy:         "all",
		AckWait:           10 * time.Minute,
		MaxAckPending:     scanWindow,
		FilterSubject:     filter,
		ReplayPolicy:      "instant",
		InactiveThreshold: 30 * time.Second,
		IdleHeartbeat:     idleHeartbeat,
		MemoryStorage:     true,
		Replicas:          1,
	}
	switch {
	case !start.time.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = "by_start_time", &start.time
	case start.seq > 1:
		cfg.DeliverPolicy, cfg.OptStartSeq = "by_start_sequence", start.seq
	}
	var info struct {
		Name       string    `json:"name"`
		NumPending uint64    `json:"num_pending"`
		Error      *apiError `json:"error"`
		Delivered  struct {
			Consumer uint64 `json:"consumer_seq"`
		} `json:"delivered"`
	}
	req := struct {
		Stream string         `json:"stream_name"`
		Config consumerConfig `json:"config"`
	}{b.cfg.Stream, cfg}
	if err := b.api(ctx, "CONSUMER.CREATE."+b.cfg.Stream, req, &info); err != nil {
		return fmt.Errorf("create read consumer on %s: %w", filter, err)
	}
	if info.Error != nil {
		return fmt.Errorf("create read consumer on %s: %w", filter, info.Error)
	}
	defer func() {
		_ = sub.Unsubscribe()
		dctx, cancel := b.cleanupCtx(ctx)
		defer cancel()
		var resp struct {
			Error *apiError `json:"error"`
		}
		derr := b.api(dctx, "CONSUMER.DELETE."+b.cfg.Stream+"."+info.Name, struct{}{}, &resp)
		if derr == nil && resp.Error != nil && resp.Error.Code != 404 {
			derr = resp.Error
		}
		if derr != nil && err == nil {
			err = fmt.Errorf("delete read consumer %s: %w", info.Name, derr)
		}
	}()
	if start.end == 0 && info.NumPending == 0 && info.Delivered.Consumer == 0 {
		return nil
	}
	stall := time.NewTimer(b.cfg.RequestTimeout)
	defer stall.Stop()
	var dseq uint64
	earlyBeats := 0      // heartbeats before the first delivery
	var last *natsgo.Msg // the latest message not acknowledged
	active := time.Now() // of the last delivery
	unacked := 0
	for {
		var m *natsgo.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-stall.C:
			return fmt.Errorf("scan %s: no message for %v: %w", filter, b.cfg.RequestTimeout, errStalled)
		}
		if m.Header.Get("Status") == "100" {
			// Idle heartbeat: the consumer has nothing to deliver. The
			// pending count of the last message can be stale (messages
			// purged meanwhile), so this, not pending, ends the scan.
			// Unless it is waiting for an ack, or the heartbeat is one
			// sent before the consumer began to deliver.
			if time.Since(active) < idleHeartbeat/2 {
				continue
			}
			// A busy server can send heartbeats before the first message
			// of a consumer that had messages pending when it was made;
			// ending there would answer an empty page. Wait a bounded
			// number of them (messages purged meanwhile end it then).
			if dseq == 0 && info.NumPending > 0 && earlyBeats < maxEarlyBeats {
				earlyBeats++
				continue
			}
			if last == nil {
				return nil
			}
			active = time.Now()
			_ = last.Ack()
			last, unacked = nil, 0
			continue
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("scan %s: %w", filter, err)
		}
		if md.Sequence.Consumer != dseq+1 {
			return fmt.Errorf("scan %s: delivery %d after %d: %w", filter, md.Sequence.Consumer, dseq, errStalled)
		}
		dseq = md.Sequence.Consumer
		active = time.Now()
		more, err := fn(scanMsg{rawMsg{seq: md.Sequence.Stream, subject: m.Subject, data: m.Data}, md.NumPending})
		if err != nil || !more || start.done(md.Sequence.Stream, md.NumPending) {
			return err
		}
		last = m
		if unacked++; unacked >= scanWindow/4 {
			_ = m.Ack()
			unacked, last = 0, nil
		}
		stall.Reset(b.cfg.RequestTimeout)
	}
}

type consumerConfig struct {
	DeliverSubject    string        `json:"deliver_subject"`
	DeliverPolicy     string        `json:"deliver_policy"`
	OptStartSeq       uint64        `json:"opt_start_seq,omitempty"`
	OptStartTime      *time.Time    `json:"opt_start_time,omitempty"`
	AckPolicy         string        `json:"ack_policy"`
	AckWait           time.Duration `json:"ack_wait"`
	MaxAckPending     int           `json:"max_ack_pending"`
	FilterSubject     string        `json:"filter_subject"`
	ReplayPolicy      string        `json:"replay_policy"`
	InactiveThreshold time.Duration `json:"inactive_threshold"`
	IdleHeartbeat     time.Duration `json:"idle_heartbeat"`
	MemoryStorage     bool          `json:"mem_storage"`
	Replicas          int           `json:"num_replicas"`
}

// versionAtLeast reports whether a server version "major.minor.patch[-x]"
// is at least major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
