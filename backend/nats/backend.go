package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// Backend is a varve.Backend on one JetStream stream. It is safe for
// concurrent use.
type Backend struct {
	cfg     Config
	nc      *natsgo.Conn
	ownConn bool
	js      jetstream.JetStream
	c       *jsclient.Client

	evPrefix  string // "<prefix>.e."
	allSubj   string // "<prefix>.e.>"
	chPrefix  string // "<prefix>.c."
	floorSubj string // "<prefix>.f"
	watchSubj string // "<prefix>.w.>"
	checkSubj string // "<prefix>.k": the checks of multi-stream appends

	// multiErr says why the backend does not append to several streams
	// atomically (nil when it does): decided in New from the server's
	// version and the stream's configuration.
	multiErr error

	layoutSubj string // "<prefix>.l": the layout marker
	// replicated: the stream has more than one replica, so direct gets
	// may be answered by followers that lag (see filter.go).
	replicated bool
	sep        string // category separator, from the layout marker

	maxPayload int
	closed     atomic.Bool

	streams *streamCache // what the backend knows of each stream
	floors  floorTable   // truncation floors inside commits, for $all
	cursors cursorCache  // open $all scans between pages

	kvLock chan struct{} // held while a bucket is opened
	snaps  jetstream.KeyValue
	ckpts  jetstream.KeyValue
	keys   jetstream.KeyValue
	keysJS jetstream.Stream // the keys bucket's stream, for secure deletes

	// notify: the stream republishes commits' headers to watchSubj, which
	// wakes watchers in every process (decided in New: see NoNotify).
	notify    bool
	watchMu   sync.Mutex
	watchSub  *natsgo.Subscription
	watchCh   chan struct{}
	watchPoll *time.Timer // wakes the watchers when no notification can come
}

var (
	_ varve.Backend         = (*Backend)(nil)
	_ varve.SnapshotStore   = (*Backend)(nil)
	_ varve.CheckpointStore = (*Backend)(nil)
	_ varve.Watcher         = (*Backend)(nil)
	_ varve.FilteredReader  = (*Backend)(nil)
	_ varve.MultiAppender   = (*Backend)(nil)
)

// ErrUnreachable is in the errors of calls made while the connection to
// the server is down: they fail at once instead of waiting for their
// deadline.
var ErrUnreachable = jsclient.ErrUnreachable

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
		allSubj:   cfg.Prefix + ".e.>",
		chPrefix:  cfg.Prefix + ".c.",
		floorSubj: cfg.Prefix + ".f",
		watchSubj: cfg.Prefix + ".w.>",
		checkSubj: cfg.Prefix + ".k",

		layoutSubj: cfg.Prefix + ".l",
		floors:     floorTable{floors: make(map[uint64]varve.Version)},
		watchCh:    make(chan struct{}),
		kvLock:     make(chan struct{}, 1),
	}
	if b.streams, err = newStreamCache(cfg.CachedStreams, cfg.CachedEventIDs); err != nil {
		return nil, fmt.Errorf("nats: stream cache: %w", err)
	}
	if b.nc == nil {
		opts := append([]natsgo.Option{natsgo.Name("varve"), natsgo.MaxReconnects(-1)}, cfg.Options...)
		// The error says why, never where: the URL may hold credentials.
		if b.nc, err = natsgo.Connect(cfg.URL, opts...); err != nil {
			return nil, fmt.Errorf("nats: connect: %w", err)
		}
		b.ownConn = true
	}
	if b.js, err = jetstream.New(b.nc); err != nil {
		b.closeConn()
		return nil, fmt.Errorf("nats: jetstream context: %w", err)
	}
	if b.c, err = jsclient.New(b.nc, jsclient.Config{Stream: cfg.Stream, Timeout: cfg.RequestTimeout}); err != nil {
		b.closeConn()
		return nil, fmt.Errorf("nats: %w", err)
	}
	b.maxPayload = int(b.nc.MaxPayload())
	err = b.ensureStream(ctx)
	if err == nil {
		lctx, cancel := b.c.Bound(ctx)
		err = b.loadLayout(lctx)
		cancel()
	}
	if err != nil {
		b.c.Close(0)
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
	var republish *jetstream.RePublish
	if !b.cfg.NoNotify {
		republish = b.republish()
	}
	return jetstream.StreamConfig{
		Name:               b.cfg.Stream,
		Description:        "varve event store",
		Subjects:           b.subjects(),
		Retention:          jetstream.LimitsPolicy,
		Storage:            storage,
		Replicas:           b.cfg.Replicas,
		Duplicates:         b.cfg.DuplicateWindow,
		AllowDirect:        true,
		RePublish:          republish,
		AllowAtomicPublish: b.c.AtomicBatches(),
		AllowMsgTTL:        b.c.AtomicBatches(),
	}
}

// republish is the stream's republish of commits' headers that Watch
// subscribes to.
func (b *Backend) republish() *jetstream.RePublish {
	return &jetstream.RePublish{Source: b.allSubj, Destination: b.watchSubj, HeadersOnly: true}
}

// checkReplicas refuses a replicated stream on a server that does not
// check expected subject sequences one after the other: there two appends
// to a stream at the same expected version could both be stored.
func (b *Backend) checkReplicas(replicas int) error {
	if replicas > 1 && !b.c.SerialSubjectChecks() {
		return fmt.Errorf("nats: stream %s has %d replicas, and server %s lets concurrent publishes with the same expected subject sequence all be stored on a replicated stream (nats-server issue #4320, fixed in 2.9.21): optimistic concurrency would not hold; upgrade the servers, or use one replica: %w",
			b.cfg.Stream, replicas, b.nc.ConnectedServerVersion(), varve.ErrNotSupported)
	}
	return nil
}

func (b *Backend) subjects() []string {
	subjs := []string{b.allSubj, b.chPrefix + ">", b.floorSubj, b.layoutSubj}
	if b.c.AtomicBatches() {
		subjs = append(subjs, b.checkSubj)
	}
	return subjs
}

// ensureStream creates the stream, or checks an existing one: it must have
// the backend's subjects (a stream without the layout marker's is of the
// old layout), direct gets and the headers-only republish that Watch
// relies on. On servers with atomic batch publishes (2.12+) it also allows
// them, and per-message TTLs and the subject of the checks of
// multi-stream appends; if the server refuses that, the backend has no
// multi-stream appends.
func (b *Backend) ensureStream(ctx context.Context) error {
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	b.multiErr = nil
	if !b.c.AtomicBatches() {
		b.multiErr = fmt.Errorf("nats: server %s has no atomic batch publish (2.12+): %w", b.nc.ConnectedServerVersion(), varve.ErrNotSupported)
	}
	want := b.streamConfig()
	b.c.CountRequest()
	s, err := b.js.Stream(ctx, b.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if err := b.checkReplicas(want.Replicas); err != nil {
			return err
		}
		b.c.CountRequest()
		_, err = b.js.CreateStream(ctx, want)
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("nats: create stream %s: %w", b.cfg.Stream, b.c.Err(ctx, err))
		}
		if err == nil {
			b.replicated = want.Replicas > 1
			b.notify = want.RePublish != nil
			return nil
		}
		b.c.CountRequest()
		s, err = b.js.Stream(ctx, b.cfg.Stream)
	}
	if err != nil {
		return fmt.Errorf("nats: look up stream %s: %w", b.cfg.Stream, b.c.Err(ctx, err))
	}
	have := s.CachedInfo().Config
	if err := b.checkReplicas(have.Replicas); err != nil {
		return err
	}
	b.replicated = have.Replicas > 1
	subjects := map[string]bool{}
	for _, subj := range have.Subjects {
		subjects[subj] = true
	}
	oldLayout, addCheck := false, false
	for _, subj := range want.Subjects {
		switch {
		case subjects[subj]:
		case subj == b.layoutSubj:
			oldLayout = true
		case subj == b.checkSubj:
			addCheck = true
		default:
			return fmt.Errorf("nats: stream %s exists without subject %q (has %v): %w",
				b.cfg.Stream, subj, have.Subjects, varve.ErrInvalidArgument)
		}
	}
	if oldLayout {
		return fmt.Errorf("nats: stream %s has no subject %q: %w", b.cfg.Stream, b.layoutSubj, ErrOldLayout)
	}
	if !have.AllowDirect {
		return fmt.Errorf("nats: stream %s exists without direct gets: %w", b.cfg.Stream, varve.ErrInvalidArgument)
	}
	if have.RePublish != nil && *have.RePublish != *b.republish() {
		return fmt.Errorf("nats: stream %s republishes other than %s to %s: %w",
			b.cfg.Stream, b.allSubj, b.watchSubj, varve.ErrInvalidArgument)
	}
	if have.RePublish == nil && !b.cfg.NoNotify {
		return fmt.Errorf("nats: stream %s was created without notifications (NoNotify): open it with NoNotify (no_notify=true), or add the republish of %s to %s: %w",
			b.cfg.Stream, b.allSubj, b.watchSubj, varve.ErrInvalidArgument)
	}
	b.notify = have.RePublish != nil
	if !addCheck && (!want.AllowAtomicPublish || have.AllowAtomicPublish) && (!want.AllowMsgTTL || have.AllowMsgTTL) {
		return nil
	}
	if addCheck {
		have.Subjects = append(have.Subjects, b.checkSubj)
	}
	have.AllowAtomicPublish, have.AllowMsgTTL = true, true
	b.c.CountRequest()
	if _, err := b.js.UpdateStream(ctx, have); err != nil {
		// The stream may have settings that atomic batches exclude (async
		// persistence, say): it works on without multi-stream appends.
		b.multiErr = fmt.Errorf("nats: stream %s refuses atomic batch publish (%w): %w", b.cfg.Stream, b.c.Err(ctx, err), varve.ErrNotSupported)
	}
	return nil
}

// Features implements varve.Backend.
func (b *Backend) Features() varve.Features {
	return varve.Features{
		Name:           "nats",
		Durable:        !b.cfg.MemoryStorage,
		UniqueEventIDs: true,
	}
}

// Requests is the number of requests that
// waited for a server reply (publishes, gets, consumer and stream API calls).
func (b *Backend) Requests() uint64 { return b.c.Requests() }

// Conn returns the backend's NATS connection.
func (b *Backend) Conn() *natsgo.Conn { return b.nc }

// closeWait bounds how long Close waits for the server to delete the
// consumers of open scans.
const closeWait = time.Second

// Close implements varve.Backend. Calls in flight return varve.ErrClosed at
// once and watchers wake up; the consumers of open scans are deleted; the
// connection is closed if the backend opened it.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.c.Close(closeWait)
	b.cursors.close()
	b.watchMu.Lock()
	if b.watchSub != nil {
		_ = b.watchSub.Unsubscribe()
		b.watchSub = nil
	}
	if b.watchPoll != nil {
		b.watchPoll.Stop()
		b.watchPoll = nil
	}
	close(b.watchCh) // wakes the watchers, which then find the backend closed
	b.watchMu.Unlock()
	b.closeConn()
	return nil
}

func (b *Backend) closeConn() {
	if b.ownConn {
		b.nc.Close()
	}
}

// ready is checked first by every call: the backend is open, ctx is not
// done, and the connection is up.
func (b *Backend) ready(ctx context.Context) error {
	if b.closed.Load() {
		return varve.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.fail("", b.c.Ready())
}

// fail is the error of a call: outcomes (conflicts, missing or deleted
// streams, duplicates), varve.ErrClosed and the bare context error as they
// are; anything else with "nats: " and what was being done. The Store adds
// the operation and the stream.
func (b *Backend) fail(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jsclient.ErrClosed) || b.closed.Load():
		return varve.ErrClosed
	case isOutcome(err), err == context.Canceled, err == context.DeadlineExceeded:
		return err
	case what == "":
		return fmt.Errorf("nats: %w", err)
	}
	return fmt.Errorf("nats: %s: %w", what, err)
}

// isOutcome reports whether err is an answer about the stream rather than
// a failure to get one.
func isOutcome(err error) bool {
	return errors.Is(err, varve.ErrWrongExpectedVersion) || errors.Is(err, varve.ErrStreamNotFound) ||
		errors.Is(err, varve.ErrStreamDeleted) || errors.Is(err, varve.ErrDuplicateEvent) ||
		errors.Is(err, varve.ErrClosed)
}
