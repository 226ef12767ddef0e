package memory

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/notify"
)

const (
	shardCount = 256
	// indexAbove is the length from which the event ids of a stream whose
	// ids do not ascend are looked up in a map instead of by scanning it.
	indexAbove = 8
	// compactAbove is the number of dead log entries from which the log is
	// compacted, once they also outnumber the live ones.
	compactAbove = 4096
)

// Backend is the in-memory backend. The zero value is not usable; call New.
type Backend struct {
	seed   maphash.Seed
	shards [shardCount]shard
	log    eventLog
	closed atomic.Bool

	kvMu        sync.Mutex
	snapshots   map[string]varve.Snapshot
	checkpoints map[string]varve.Position
	leases      map[string]lease
	keys        map[string]varve.WrappedKey
}

type shard struct {
	mu      sync.RWMutex
	streams map[string]*stream
	_       [64 - 32]byte // keep neighbouring shards' locks on separate cache lines
}

type record struct {
	ev   varve.RecordedEvent
	cat  string
	dead bool // guarded by eventLog.mu
}

type stream struct {
	name    string
	version varve.Version
	events  []*record                // live events, in version order
	ids     map[uint64]varve.Version // fingerprint of an event id -> the newest version with it; only when unsorted
	// unsorted is set once an event's id does not sort after its
	// predecessor's. Until then (the ids of one UUIDv7 generator, such as
	// varve.NewEventID or uuid.NewV7, ascend) ids are found by binary
	// search and need no index.
	unsorted   bool
	created    time.Time
	updated    time.Time
	lastPos    varve.Position
	deleted    bool
	tombstoned bool
}

type eventLog struct {
	mu   sync.RWMutex
	recs []*record // in position order; dead entries are skipped by readers
	// byCat, byType and byTag index recs by category, by event type and by
	// tag, each list in position order, for filtered reads and queries.
	byCat, byType, byTag map[string][]*record
	dead                 int
	seq                  uint64
	watch                notify.Broadcast // woken after each commit
}

// New returns an empty in-memory backend.
func New() *Backend {
	b := &Backend{
		seed:        maphash.MakeSeed(),
		snapshots:   map[string]varve.Snapshot{},
		checkpoints: map[string]varve.Position{},
	}
	for i := range b.shards {
		b.shards[i].streams = map[string]*stream{}
	}
	return b
}

// Features implements varve.Backend.
func (b *Backend) Features() varve.Features {
	return varve.Features{Name: "memory", UniqueEventIDs: true}
}

// Close implements varve.Backend. The data stays until the Backend is
// garbage collected.
func (b *Backend) Close() error {
	b.closed.Store(true)
	b.log.watch.Close()
	return nil
}

func (b *Backend) check(ctx context.Context) error {
	if b.closed.Load() {
		return varve.ErrClosed
	}
	return ctx.Err()
}

func (b *Backend) shard(stream string) *shard { return &b.shards[b.shardIndex(stream)] }

func (b *Backend) shardIndex(stream string) int {
	return int(maphash.String(b.seed, stream) % shardCount)
}

// Append implements varve.Backend.
func (b *Backend) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	return b.append(ctx, req, nil)
}

// append appends under the stream's shard lock; check, when not nil, runs
// under the log's lock right before the write (see commit).
func (b *Backend) append(ctx context.Context, req varve.AppendRequest, check func() error) (varve.AppendResult, error) {
	if err := b.check(ctx); err != nil {
		return varve.AppendResult{}, err
	}
	sh := b.shard(req.Stream)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var ps [1]plan
	var err error
	if ps[0], err = decide(sh, req); err != nil || ps[0].retry {
		return ps[0].res, err
	}
	err = b.commit(ps[:], check)
	return ps[0].res, err
}

// plan is an append decided under its shard's lock: a retry with its
// original result, or the records to write.
type plan struct {
	sh      *shard
	req     varve.AppendRequest
	st      *stream
	current varve.Version
	retry   bool
	res     varve.AppendResult
	recs    []record
}

// decide checks an append against its stream, under the shard's lock.
func decide(sh *shard, req varve.AppendRequest) (plan, error) {
	p := plan{sh: sh, req: req, st: sh.streams[req.Stream]}
	if st := p.st; st != nil {
		if st.tombstoned {
			return p, varve.ErrStreamDeleted
		}
		res, retry, err := st.retry(req.Events)
		if retry {
			p.res, p.retry = res, true
			return p, err
		}
		p.current = st.version
	}
	if !req.Expected.Matches(p.current) {
		return p, &varve.WrongExpectedVersionError{Stream: req.Stream, Expected: req.Expected, Actual: p.current}
	}
	if p.st != nil {
		for i := 1; i < len(req.Events); i++ {
			if p.st.find(req.Events[i].ID) >= 0 {
				return p, fmt.Errorf("event %s: %w", req.Events[i].ID, varve.ErrDuplicateEvent)
			}
		}
	}
	return p, nil
}

// build creates the plan's stream if needed and its records, without
// positions.
func (p *plan) build(now time.Time) {
	req := &p.req
	st := p.st
	if st == nil {
		st = &stream{name: strings.Clone(req.Stream), created: now}
		p.sh.streams[st.name] = st
		p.st = st
	} else if st.deleted {
		st.deleted, st.created = false, now
	}
	cat := req.Category
	if strings.HasPrefix(st.name, cat) {
		cat = st.name[:len(cat)]
	} else {
		cat = strings.Clone(cat)
	}
	p.recs = make([]record, len(req.Events))
	size := 0
	for i := range req.Events {
		size += len(req.Events[i].Data) + len(req.Events[i].Metadata)
	}
	var bytes []byte
	if size > 0 {
		bytes = make([]byte, 0, size)
	}
	for i := range req.Events {
		e := &req.Events[i]
		r := &p.recs[i].ev
		r.ID, r.Type, r.Stream = e.ID, e.Type, st.name
		if len(e.Tags) > 0 {
			r.Tags = make([]string, len(e.Tags))
			for k, t := range e.Tags {
				r.Tags[k] = strings.Clone(t)
			}
		}
		p.recs[i].cat = cat
		r.Version = p.current + varve.Version(i) + 1
		r.RecordedAt = now
		if len(e.Data) > 0 {
			bytes = append(bytes, e.Data...)
			r.Data = bytes[len(bytes)-len(e.Data) : len(bytes) : len(bytes)]
		}
		if len(e.Metadata) > 0 {
			bytes = append(bytes, e.Metadata...)
			r.Metadata = bytes[len(bytes)-len(e.Metadata) : len(bytes) : len(bytes)]
		}
	}
}

// commit writes the plans' records to the log under one lock, so that
// readers see all of them or none, then to their streams, whose shards'
// locks the caller holds. A check runs under the log's lock first, so that
// nothing commits between it and the write; when it fails, nothing is
// written.
func (b *Backend) commit(plans []plan, check func() error) error {
	now := time.Now()
	if check == nil {
		for i := range plans {
			plans[i].build(now)
		}
	}
	l := &b.log
	l.mu.Lock()
	if check != nil {
		if err := check(); err != nil {
			l.mu.Unlock()
			return err
		}
		for i := range plans {
			plans[i].build(now)
		}
	}
	if l.byCat == nil {
		l.byCat, l.byType, l.byTag = map[string][]*record{}, map[string][]*record{}, map[string][]*record{}
	}
	for i := range plans {
		recs := plans[i].recs
		l.recs = grow(l.recs, len(recs))
		cat := recs[0].cat
		cats := grow(l.byCat[cat], len(recs))
		for i := range recs {
			l.seq++
			r := &recs[i]
			r.ev.Position = varve.Position{Seq: l.seq}
			l.recs = append(l.recs, r)
			cats = append(cats, r)
			l.byType[r.ev.Type] = append(grow(l.byType[r.ev.Type], 1), r)
			for _, t := range r.ev.Tags {
				l.byTag[t] = append(grow(l.byTag[t], 1), r)
			}
		}
		l.byCat[cat] = cats
	}
	l.mu.Unlock()
	l.watch.Notify()

	for i := range plans {
		p := &plans[i]
		st, recs := p.st, p.recs
		st.events = grow(st.events, len(recs))
		for i := range recs {
			if !st.unsorted && len(st.events) > 0 && compareIDs(recs[i].ev.ID, st.events[len(st.events)-1].ev.ID) <= 0 {
				st.unsorted = true
			}
			st.events = append(st.events, &recs[i])
		}
		if st.unsorted && len(st.events) >= indexAbove {
			if st.ids == nil {
				st.ids = make(map[uint64]varve.Version, 2*len(st.events))
				for _, r := range st.events {
					st.ids[fingerprint(r.ev.ID)] = r.ev.Version
				}
			} else {
				for i := range recs {
					st.ids[fingerprint(recs[i].ev.ID)] = recs[i].ev.Version
				}
			}
		}
		last := recs[len(recs)-1].ev
		st.version, st.updated, st.lastPos = last.Version, now, last.Position
		p.res = varve.AppendResult{FirstVersion: recs[0].ev.Version, LastVersion: last.Version, Position: last.Position}
	}
	return nil
}

// grow makes room for n more records, doubling the capacity: append grows
// large slices by only a quarter, which made copying the log and its
// indexes (by category, type and tag) the main cost of an append once they
// held millions of events.
func grow(s []*record, n int) []*record {
	if len(s)+n <= cap(s) {
		return s
	}
	g := make([]*record, len(s), max(2*cap(s), len(s)+n, 8))
	copy(g, s)
	return g
}

// fingerprint folds an event id into the key of a stream's id index. A
// 64-bit key takes the map's fast path and halves its entries; two ids of
// one stream with the same fingerprint are told apart by find.
func fingerprint(id uuid.UUID) uint64 {
	return binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:])
}

// compareIDs orders event ids by their bytes, which for UUIDv7 is the
// order they were made in.
func compareIDs(a, b uuid.UUID) int {
	if c := cmp.Compare(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])); c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}

// find returns the index in st.events of the event with the given id, or -1.
// While the stream's ids ascend, an id after the last one is not in it and
// any other is found by binary search. Otherwise a fingerprint missing from
// the index means the id is not in the stream; one that points at another
// event (a collision) falls back to a scan.
func (st *stream) find(id uuid.UUID) int {
	n := len(st.events)
	if n == 0 {
		return -1
	}
	if !st.unsorted {
		if compareIDs(id, st.events[n-1].ev.ID) > 0 {
			return -1
		}
		i, ok := slices.BinarySearchFunc(st.events, id, func(r *record, id uuid.UUID) int { return compareIDs(r.ev.ID, id) })
		if !ok {
			return -1
		}
		return i
	}
	if st.ids != nil {
		v, ok := st.ids[fingerprint(id)]
		if !ok {
			return -1
		}
		if i := int(v - st.events[0].ev.Version); v >= st.events[0].ev.Version && i < len(st.events) && st.events[i].ev.ID == id {
			return i
		}
	}
	for i, r := range st.events {
		if r.ev.ID == id {
			return i
		}
	}
	return -1
}

// retry reports whether the append's first event is already in the stream;
// if so it returns the original result, or ErrDuplicateEvent when the
// append is not an exact retry.
func (st *stream) retry(evs []varve.Event) (varve.AppendResult, bool, error) {
	i := st.find(evs[0].ID)
	if i < 0 {
		return varve.AppendResult{}, false, nil
	}
	if i+len(evs) > len(st.events) {
		return varve.AppendResult{}, true, fmt.Errorf("retry of %d events from version %d: %w", len(evs), st.events[i].ev.Version, varve.ErrDuplicateEvent)
	}
	for k := range evs {
		if st.events[i+k].ev.ID != evs[k].ID {
			return varve.AppendResult{}, true, fmt.Errorf("event %s: %w", evs[k].ID, varve.ErrDuplicateEvent)
		}
	}
	last := st.events[i+len(evs)-1].ev
	return varve.AppendResult{FirstVersion: st.events[i].ev.Version, LastVersion: last.Version, Position: last.Position}, true, nil
}

// ReadStream implements varve.Backend.
func (b *Backend) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	if err := b.check(ctx); err != nil {
		return buf, err
	}
	sh := b.shard(q.Stream)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	st := sh.streams[q.Stream]
	switch {
	case st == nil:
		return buf, varve.ErrStreamNotFound
	case st.tombstoned:
		return buf, varve.ErrStreamDeleted
	case st.deleted:
		return buf, varve.ErrStreamNotFound
	case len(st.events) == 0:
		return buf, nil
	}
	first := st.events[0].ev.Version
	if q.Direction == varve.Forward {
		from := max(q.From, first)
		budget := newBudget(q.Limit, q.MaxBytes)
		for i := int(from - first); i < len(st.events) && budget.open(); i++ {
			buf = budget.add(buf, &st.events[i].ev)
		}
		return buf, nil
	}
	from := q.From
	if from == 0 || from > st.version {
		from = st.version
	}
	if from < first {
		return buf, nil
	}
	budget := newBudget(q.Limit, q.MaxBytes)
	for i := int(from - first); i >= 0 && budget.open(); i-- {
		buf = budget.add(buf, &st.events[i].ev)
	}
	return buf, nil
}

// ReadAll implements varve.Backend.
func (b *Backend) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	if err := b.check(ctx); err != nil {
		return buf, err
	}
	l := &b.log
	l.mu.RLock()
	defer l.mu.RUnlock()
	budget := newBudget(q.Limit, q.MaxBytes)
	if q.Direction == varve.Backward {
		i := len(l.recs)
		if !q.Before.IsZero() {
			i = sort.Search(len(l.recs), func(i int) bool { return !l.recs[i].ev.Position.Less(q.Before) })
		}
		for i--; i >= 0 && budget.open(); i-- {
			if r := l.recs[i]; !r.dead {
				buf = budget.add(buf, &r.ev)
			}
		}
		return buf, nil
	}
	i := sort.Search(len(l.recs), func(i int) bool { return q.After.Less(l.recs[i].ev.Position) })
	for ; i < len(l.recs) && budget.open(); i++ {
		if r := l.recs[i]; !r.dead {
			buf = budget.add(buf, &r.ev)
		}
	}
	return buf, nil
}

// budget is what a page may still take: events, and bytes of event data
// when bytes was set (the event that reaches it is taken).
type budget struct {
	events, bytes int
	bounded       bool
}

func newBudget(limit, maxBytes int) budget {
	return budget{events: limit, bytes: maxBytes, bounded: maxBytes > 0}
}

func (b *budget) open() bool { return b.events > 0 && (!b.bounded || b.bytes > 0) }

func (b *budget) add(buf []varve.RecordedEvent, e *varve.RecordedEvent) []varve.RecordedEvent {
	b.events--
	b.bytes -= e.Size()
	return append(buf, *e)
}

// LastPosition implements varve.Backend.
func (b *Backend) LastPosition(ctx context.Context) (varve.Position, error) {
	if err := b.check(ctx); err != nil {
		return varve.Position{}, err
	}
	b.log.mu.RLock()
	defer b.log.mu.RUnlock()
	return varve.Position{Seq: b.log.seq}, nil
}

// StreamInfo implements varve.Backend.
func (b *Backend) StreamInfo(ctx context.Context, name string) (varve.StreamInfo, error) {
	if err := b.check(ctx); err != nil {
		return varve.StreamInfo{}, err
	}
	sh := b.shard(name)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	st := sh.streams[name]
	if st == nil {
		return varve.StreamInfo{}, varve.ErrStreamNotFound
	}
	return varve.StreamInfo{
		Stream: st.name, Version: st.version, LastPosition: st.lastPos,
		CreatedAt: st.created, UpdatedAt: st.updated, Deleted: st.deleted || st.tombstoned, Tombstoned: st.tombstoned,
	}, nil
}

// Truncate implements varve.Backend.
func (b *Backend) Truncate(ctx context.Context, name string, before varve.Version) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	sh := b.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.streams[name]
	switch {
	case st == nil || st.deleted && !st.tombstoned:
		return varve.ErrStreamNotFound
	case st.tombstoned:
		return varve.ErrStreamDeleted
	}
	k := 0
	for k < len(st.events) && st.events[k].ev.Version < before {
		k++
	}
	if k == 0 {
		return nil
	}
	b.log.kill(st.events[:k])
	if st.ids != nil {
		// Versions grow with every append, so an index entry that points at
		// a removed event has no live event left behind it with its key.
		for _, r := range st.events[:k] {
			if fp := fingerprint(r.ev.ID); st.ids[fp] == r.ev.Version {
				delete(st.ids, fp)
			}
		}
	}
	st.events = append([]*record(nil), st.events[k:]...)
	st.updated = time.Now()
	return nil
}

// Delete implements varve.Backend.
func (b *Backend) Delete(ctx context.Context, name string, expected varve.ExpectedVersion, tombstone bool) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	sh := b.shard(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.streams[name]
	switch {
	case st != nil && st.tombstoned:
		return varve.ErrStreamDeleted
	case (st == nil || st.deleted) && !tombstone:
		return varve.ErrStreamNotFound
	}
	var current varve.Version
	if st != nil {
		current = st.version
	}
	if !expected.Matches(current) {
		return &varve.WrongExpectedVersionError{Stream: name, Expected: expected, Actual: current}
	}
	now := time.Now()
	if st == nil {
		st = &stream{name: strings.Clone(name), created: now}
		sh.streams[st.name] = st
	}
	b.log.kill(st.events)
	st.events, st.ids, st.unsorted, st.version = nil, nil, false, 0
	st.deleted, st.tombstoned, st.updated = true, tombstone, now
	b.kvMu.Lock()
	delete(b.snapshots, name)
	b.kvMu.Unlock()
	return nil
}

// kill marks records dead and compacts the log when dead entries dominate.
func (l *eventLog) kill(recs []*record) {
	if len(recs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		r.dead = true
	}
	l.dead += len(recs)
	if l.dead < compactAbove || 2*l.dead < len(l.recs) {
		return
	}
	live := make([]*record, 0, len(l.recs)-l.dead)
	for _, r := range l.recs {
		if !r.dead {
			live = append(live, r)
		}
	}
	l.recs, l.dead = live, 0
	for _, index := range []map[string][]*record{l.byCat, l.byType, l.byTag} {
		for k, rs := range index {
			if rs = compact(rs); len(rs) == 0 {
				delete(index, k)
			} else {
				index[k] = rs
			}
		}
	}
}

// compact returns the live records of rs, in a new slice when some are dead.
func compact(rs []*record) []*record {
	n := 0
	for _, r := range rs {
		if !r.dead {
			n++
		}
	}
	if n == len(rs) {
		return rs
	}
	live := make([]*record, 0, n)
	for _, r := range rs {
		if !r.dead {
			live = append(live, r)
		}
	}
	return live
}

// Watch implements varve.Watcher.
func (b *Backend) Watch() <-chan struct{} { return b.log.watch.Wait() }

// SaveSnapshot implements varve.SnapshotStore.
func (b *Backend) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	s.Stream = strings.Clone(s.Stream)
	s.Data = append([]byte(nil), s.Data...)
	b.kvMu.Lock()
	b.snapshots[s.Stream] = s
	b.kvMu.Unlock()
	return nil
}

// LoadSnapshot implements varve.SnapshotStore.
func (b *Backend) LoadSnapshot(ctx context.Context, stream string) (varve.Snapshot, bool, error) {
	if err := b.check(ctx); err != nil {
		return varve.Snapshot{}, false, err
	}
	b.kvMu.Lock()
	s, ok := b.snapshots[stream]
	b.kvMu.Unlock()
	return s, ok, nil
}

// SaveCheckpoint implements varve.CheckpointStore.
func (b *Backend) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	b.kvMu.Lock()
	b.checkpoints[strings.Clone(name)] = pos
	b.kvMu.Unlock()
	return nil
}

// LoadCheckpoint implements varve.CheckpointStore.
func (b *Backend) LoadCheckpoint(ctx context.Context, name string) (varve.Position, bool, error) {
	if err := b.check(ctx); err != nil {
		return varve.Position{}, false, err
	}
	b.kvMu.Lock()
	p, ok := b.checkpoints[name]
	b.kvMu.Unlock()
	return p, ok, nil
}
