package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/varve-go/varve"
)

type opKind uint8

const (
	opAppend opKind = iota
	opTruncate
	opDelete
	opSnapshot
	opCheckpoint
	opMulti
	opAppendIf
	opLease
	opRelease
	opFencedCheckpoint
	opTx
	opReclaim
	opPutKey
	opDeleteKey
	opRewrapKey
)

// op is one write queued to the writer goroutine.
type op struct {
	ctx  context.Context
	kind opKind

	stream    string
	category  string
	expected  varve.ExpectedVersion
	events    []varve.Event
	before    varve.Version
	tombstone bool
	snapshot  varve.Snapshot
	pos       varve.Position

	res     varve.AppendResult
	retried bool // the append was a retry of a committed one
	err     error
	done    chan struct{}

	// A multi-stream append: its parts (appends) and checks.
	parts  []*op
	checks []varve.StreamCheck
	// The condition of a conditional append.
	cond varve.AppendCondition
	// A lease: its holder, time-to-live and token, the lease acquired, and
	// the lease of a fenced checkpoint.
	holder    string
	ttl       time.Duration
	token     uint64
	lease     varve.Lease
	leaseName string
	// The function of a WriteTx.
	txfn func(*sql.Tx) error
	// The pages a reclaim freed.
	freed int64
	// A key to put (and the subject's key put), delete or rewrap, the
	// master of a rewrap, and whether a deletion or rewrap changed it.
	key       varve.WrappedKey
	oldMaster string
	changed   bool
}

// Stream states in the streams table.
const (
	stateLive       = 0
	stateDeleted    = 1
	stateTombstoned = 2
)

// submit queues o and waits for its result. When ctx ends first, the write
// may still commit; an exact retry of an append is idempotent.
func (b *Backend) submit(o *op) error {
	if b.closed.Load() {
		return varve.ErrClosed
	}
	if err := o.ctx.Err(); err != nil {
		return err
	}
	o.done = make(chan struct{})
	select {
	case b.queue <- o:
	case <-b.closing:
		return varve.ErrClosed
	case <-o.ctx.Done():
		return o.ctx.Err()
	}
	select {
	case <-o.done:
		return o.err
	case <-o.ctx.Done():
		return o.ctx.Err()
	case <-b.stopped:
		select {
		case <-o.done:
			return o.err
		default:
			return varve.ErrClosed
		}
	}
}

// run is the writer goroutine: it takes the first queued write, collects
// whatever else is queued (up to the batch bounds, waiting at most
// MaxBatchDelay), and commits them all in one transaction.
func (b *Backend) run() {
	defer close(b.stopped)
	var (
		batch []*op
		last  int // size of the last batch
		timer *time.Timer
	)
	w := writer{b: b}
	for {
		select {
		case o := <-b.queue:
			batch = append(batch[:0], o)
		case <-b.closing:
			b.failQueued()
			return
		}
		// The callers of the last batch were just woken on this goroutine's
		// processor and may not have run yet; let them queue their next
		// writes before the batch is cut, yielding a few times at most. A
		// lone writer does not pay for this.
		for i := 0; i < 3 && len(b.queue)+1 < last; i++ {
			runtime.Gosched()
		}
		events := len(batch[0].events)
		var deadline <-chan time.Time
	collect:
		for len(batch) < b.cfg.MaxBatchOps && events < b.cfg.MaxBatchEvents {
			select {
			case o := <-b.queue:
				batch = append(batch, o)
				events += len(o.events)
				continue
			default:
			}
			if b.cfg.MaxBatchDelay <= 0 {
				break
			}
			if deadline == nil {
				if timer == nil {
					timer = time.NewTimer(b.cfg.MaxBatchDelay)
				} else {
					timer.Reset(b.cfg.MaxBatchDelay)
				}
				deadline = timer.C
			}
			select {
			case o := <-b.queue:
				batch = append(batch, o)
				events += len(o.events)
			case <-deadline:
				break collect
			case <-b.closing:
				break collect
			}
		}
		if timer != nil {
			timer.Stop()
		}
		for pending := batch; len(pending) > 0; {
			pending = w.commit(pending)
		}
		last = len(batch)
		clear(batch)
	}
}

func (b *Backend) failQueued() {
	for {
		select {
		case o := <-b.queue:
			o.err = varve.ErrClosed
			close(o.done)
		default:
			return
		}
	}
}

// writer applies a batch of writes in one transaction on the writer
// connection. Only the writer goroutine uses it.
type writer struct {
	b    *Backend
	c    *conn
	next int64 // the position of the next event
	now  int64 // Unix nanoseconds of this transaction
	args []driver.Value
}

var bg = context.Background()

// commit applies batch in one transaction and finishes its writes. A write
// that fails with an error of its own (a conflict, a duplicate id) leaves no
// trace and the others proceed. A storage error (a full disk, an I/O error)
// rolls the transaction back: the write that hit it fails, and the others
// are returned to be committed again without it.
func (w *writer) commit(batch []*op) (retry []*op) {
	b := w.b
	if b.memory {
		c, err := b.reads.get(bg)
		if err != nil {
			finish(batch, fmt.Errorf("sqlite: commit: %w", err))
			return nil
		}
		defer b.reads.put(c, false)
	}
	w.c = b.wconn
	w.now = time.Now().UnixNano()
	if _, err := w.c.exec(bg, "BEGIN IMMEDIATE"); err != nil {
		finish(batch, fmt.Errorf("sqlite: begin a write transaction: %w", explain(err)))
		return nil
	}
	if _, err := w.c.queryRow(bg, qNextPosition, func(v []driver.Value) { w.next = asInt(v[0]) + 1 }); err != nil {
		w.rollback()
		finish(batch, fmt.Errorf("sqlite: read the last position: %w", explain(err)))
		return nil
	}
	wrote := false
	for i, o := range batch {
		o.res, o.err, o.changed = varve.AppendResult{}, nil, false
		if err := o.ctx.Err(); err != nil {
			o.err = err
			continue
		}
		err, fatal := w.apply(o)
		if fatal {
			w.rollback()
			o.err = explain(err)
			close(o.done)
			return append(batch[:i:i], batch[i+1:]...)
		}
		o.err = err
		wrote = wrote || (err == nil && (o.kind == opAppend || o.kind == opMulti || o.kind == opAppendIf))
	}
	if _, err := w.c.exec(bg, "COMMIT"); err != nil {
		w.rollback()
		finish(batch, fmt.Errorf("sqlite: commit: %w", explain(err)))
		return nil
	}
	b.commits.Add(1)
	b.ops.Add(uint64(len(batch)))
	// The deleters of keys wait for the checkpoint; the others do not.
	deleted := false
	for _, o := range batch {
		if o.kind == opDeleteKey && o.changed {
			deleted = true
		} else {
			close(o.done)
		}
	}
	if wrote {
		b.watch.Notify()
	}
	if deleted {
		w.checkpointTruncate()
		for _, o := range batch {
			if o.kind == opDeleteKey && o.changed {
				close(o.done)
			}
		}
	}
	return nil
}

func (w *writer) rollback() { _, _ = w.c.exec(bg, "ROLLBACK") }

func finish(batch []*op, err error) {
	for _, o := range batch {
		o.err = err
		close(o.done)
	}
}

// apply runs one write inside the batch's transaction. A write's own
// failures are detected before it writes anything, or are undone with a
// savepoint; fatal reports a storage error that spoils the transaction.
func (w *writer) apply(o *op) (err error, fatal bool) {
	if w.b.cfg.Inline != nil {
		switch o.kind {
		case opAppend:
			return w.inline(o, w.append)
		case opMulti:
			return w.inline(o, w.multi)
		case opAppendIf:
			return w.inline(o, w.appendIf)
		}
	}
	switch o.kind {
	case opAppend:
		return w.append(o)
	case opTruncate:
		return w.truncate(o)
	case opDelete:
		return w.delete(o)
	case opSnapshot:
		s := o.snapshot
		_, err = w.c.exec(bg, qSaveSnapshot, s.Stream, int64(s.Version), int64(s.SchemaVersion), s.Data, nanos(s.TakenAt))
		if err != nil {
			return fmt.Errorf("sqlite: save snapshot of %q: %w", s.Stream, err), true
		}
	case opMulti:
		return w.multi(o)
	case opAppendIf:
		return w.appendIf(o)
	case opLease:
		return w.acquireLease(o)
	case opRelease:
		return w.releaseLease(o)
	case opFencedCheckpoint:
		return w.fencedCheckpoint(o)
	case opTx:
		return w.tx(o)
	case opReclaim:
		return w.reclaim(o)
	case opPutKey:
		return w.putKey(o)
	case opDeleteKey:
		return w.deleteKey(o)
	case opRewrapKey:
		return w.rewrapKey(o)
	case opCheckpoint:
		_, err = w.c.exec(bg, qSaveCheckpoint, o.stream, int64(o.pos.Commit), int64(o.pos.Seq))
		if err != nil {
			return fmt.Errorf("sqlite: save checkpoint %q: %w", o.stream, err), true
		}
	}
	return nil, false
}

// streamRow is a stream as the writer and StreamInfo see it.
type streamRow struct {
	exists  bool
	id      int64
	state   int64
	version int64
	lastPos int64
	created int64
	updated int64
}

func readStream(ctx context.Context, c *conn, name string) (s streamRow, err error) {
	s.exists, err = c.queryRow(ctx, qStreamRow, func(v []driver.Value) {
		s.id, s.state = asInt(v[0]), asInt(v[1])
		s.version, s.lastPos, s.created, s.updated = asInt(v[2]), asInt(v[3]), asInt(v[4]), asInt(v[5])
		if v[6] != nil {
			s.version, s.lastPos, s.updated = asInt(v[6]), asInt(v[7]), asInt(v[8])
		}
	}, name)
	return s, err
}

func (w *writer) stream(name string) (streamRow, error) { return readStream(bg, w.c, name) }

func (w *writer) append(o *op) (error, bool) {
	s, err := w.stream(o.stream)
	if err != nil {
		return fmt.Errorf("sqlite: append: read stream: %w", err), true
	}
	return w.appendTo(o, s)
}

// appendTo is append with the stream's row read by the caller, in the
// same transaction.
func (w *writer) appendTo(o *op, s streamRow) (error, bool) {
	if s.state == stateTombstoned {
		return varve.ErrStreamDeleted, false
	}
	current := varve.Version(s.version)
	if !o.expected.Matches(current) {
		if s.exists {
			if ok, err, fatal := w.retried(s.id, o); ok || err != nil {
				return err, fatal
			}
		}
		return &varve.WrongExpectedVersionError{Stream: o.stream, Expected: o.expected, Actual: current}, false
	}
	// Only an id already in the stream can fail an insert, and a single
	// insert undoes itself: a savepoint is needed only to undo the earlier
	// events of a multi-event append to a stream with events.
	savepoint := len(o.events) > 1 && s.exists && s.state == stateLive
	if savepoint {
		if _, err := w.c.exec(bg, "SAVEPOINT a"); err != nil {
			return fmt.Errorf("sqlite: append: savepoint: %w", err), true
		}
	}
	first := w.next
	switch {
	case !s.exists:
		res, err := w.c.exec(bg, qInsertStream, o.stream, int64(stateLive), w.now)
		if err != nil {
			return fmt.Errorf("sqlite: append: create stream: %w", err), true
		}
		if s.id, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("sqlite: append: create stream: %w", err), true
		}
	case s.state == stateDeleted:
		if _, err := w.c.exec(bg, qRecreateStream, s.id, w.now); err != nil {
			return fmt.Errorf("sqlite: append: recreate stream: %w", err), true
		}
	}
	for i := 0; i < len(o.events); {
		k := insertRows(len(o.events) - i)
		args := w.args[:0]
		for j := i; j < i+k; j++ {
			e := &o.events[j]
			var tags driver.Value
			if len(e.Tags) > 0 {
				b, err := json.Marshal(e.Tags)
				if err != nil {
					return fmt.Errorf("sqlite: append: tags: %w", err), true
				}
				tags = string(b)
			}
			args = append(args, w.next+int64(j-i), s.id, s.version+int64(j)+1, e.ID[:], e.Type, e.Data, e.Metadata, w.now, o.category, tags)
		}
		_, err := w.c.exec(bg, qInsertEvents[k], args...)
		clear(args)
		w.args = args
		if err == nil {
			err = w.insertTags(o.events[i:i+k], w.next)
		}
		if err == nil {
			w.next += int64(k)
			i += k
			continue
		}
		if !isUniqueViolation(err) || !strings.Contains(err.Error(), "event_id") {
			return fmt.Errorf("sqlite: append: insert events %d..%d of %d: %w", i+1, i+k, len(o.events), err), true
		}
		w.next = first
		if savepoint {
			if _, err := w.c.exec(bg, "ROLLBACK TO a"); err != nil {
				return fmt.Errorf("sqlite: append: roll back to savepoint: %w", err), true
			}
			if _, err := w.c.exec(bg, "RELEASE a"); err != nil {
				return fmt.Errorf("sqlite: append: release savepoint: %w", err), true
			}
		}
		if ok, err, fatal := w.retried(s.id, o); ok || err != nil {
			return err, fatal
		}
		return fmt.Errorf("an event id of events %d..%d is already in the stream: %w", i+1, i+k, varve.ErrDuplicateEvent), false
	}
	last := s.version + int64(len(o.events))
	if savepoint {
		if _, err := w.c.exec(bg, "RELEASE a"); err != nil {
			return fmt.Errorf("sqlite: append: release savepoint: %w", err), true
		}
	}
	o.res = varve.AppendResult{
		FirstVersion: varve.Version(s.version + 1),
		LastVersion:  varve.Version(last),
		Position:     varve.Position{Seq: uint64(w.next - 1)},
	}
	return nil, false
}

// retried reports whether o repeats an append already in the stream: its
// first event id is there, and its ids match the stored events one for one
// (ok, o.res set) or not (ErrDuplicateEvent).
func (w *writer) retried(stream int64, o *op) (ok bool, err error, fatal bool) {
	var first int64
	found, err := w.c.queryRow(bg, qEventVersion, func(v []driver.Value) { first = asInt(v[0]) }, stream, o.events[0].ID[:])
	if err != nil {
		return false, fmt.Errorf("sqlite: append: look up event id: %w", err), true
	}
	if !found {
		return false, nil, false
	}
	n, same := 0, true
	var lastPos int64
	err = w.c.query(bg, qEventIDs, func(v []driver.Value) error {
		if string(asBytes(v[0])) != string(o.events[n].ID[:]) {
			same = false
			return errStop
		}
		lastPos = asInt(v[1])
		n++
		return nil
	}, stream, first, int64(len(o.events)))
	if err != nil {
		return false, fmt.Errorf("sqlite: append: read the events of an earlier append: %w", err), true
	}
	if !same || n != len(o.events) {
		return false, fmt.Errorf("event 0 (%s) is in the stream at version %d, and this append is not an exact retry of the one that wrote it: %w",
			o.events[0].ID, first, varve.ErrDuplicateEvent), false
	}
	o.retried = true
	o.res = varve.AppendResult{
		FirstVersion: varve.Version(first),
		LastVersion:  varve.Version(first + int64(n) - 1),
		Position:     varve.Position{Seq: uint64(lastPos)},
	}
	return true, nil, false
}

// keepLastPosition records the highest position assigned so far before
// events are removed, so that the positions of removed events at the end of
// the log are not handed out again.
func (w *writer) keepLastPosition() error {
	_, err := w.c.exec(bg, qKeepLastPosition, w.next-1)
	return err
}

func (w *writer) truncate(o *op) (error, bool) {
	s, err := w.stream(o.stream)
	switch {
	case err != nil:
		return fmt.Errorf("sqlite: truncate: read stream: %w", err), true
	case !s.exists || s.state == stateDeleted:
		return varve.ErrStreamNotFound, false
	case s.state == stateTombstoned:
		return varve.ErrStreamDeleted, false
	}
	before := int64(min(o.before, math.MaxInt64))
	if err := w.keepLastPosition(); err != nil {
		return fmt.Errorf("sqlite: truncate: %w", err), true
	}
	if _, err := w.c.exec(bg, qUpdateStream, s.id, s.state, s.version, s.lastPos, s.updated); err != nil {
		return fmt.Errorf("sqlite: truncate: update stream: %w", err), true
	}
	if _, err := w.c.exec(bg, qTruncate, s.id, before); err != nil {
		return fmt.Errorf("sqlite: truncate: delete events: %w", err), true
	}
	return nil, false
}

func (w *writer) delete(o *op) (error, bool) {
	s, err := w.stream(o.stream)
	switch {
	case err != nil:
		return fmt.Errorf("sqlite: delete: read stream: %w", err), true
	case s.state == stateTombstoned:
		return varve.ErrStreamDeleted, false
	case !o.tombstone && (!s.exists || s.state == stateDeleted):
		return varve.ErrStreamNotFound, false
	case !o.expected.Matches(varve.Version(s.version)):
		return &varve.WrongExpectedVersionError{Stream: o.stream, Expected: o.expected, Actual: varve.Version(s.version)}, false
	}
	state := int64(stateDeleted)
	if o.tombstone {
		state = stateTombstoned
	}
	if !s.exists {
		if _, err := w.c.exec(bg, qInsertStream, o.stream, int64(stateTombstoned), w.now); err != nil {
			return fmt.Errorf("sqlite: tombstone: create stream: %w", err), true
		}
		return nil, false
	}
	if err := w.keepLastPosition(); err != nil {
		return fmt.Errorf("sqlite: delete: %w", err), true
	}
	if _, err := w.c.exec(bg, qDeleteEvents, s.id); err != nil {
		return fmt.Errorf("sqlite: delete: delete events: %w", err), true
	}
	if _, err := w.c.exec(bg, qUpdateStream, s.id, state, int64(0), s.lastPos, w.now); err != nil {
		return fmt.Errorf("sqlite: delete: update stream: %w", err), true
	}
	if _, err := w.c.exec(bg, qDeleteSnapshot, o.stream); err != nil {
		return fmt.Errorf("sqlite: delete: delete snapshot: %w", err), true
	}
	return nil, false
}

// Append implements [varve.Backend]. It queues the append to the writer and
// waits for the group commit that holds it. When ctx ends first, Append
// returns ctx.Err() at once, but the append may still commit (an exact
// retry is idempotent), and the writer may read req.Events until then.
func (b *Backend) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	o := &op{ctx: ctx, kind: opAppend, stream: req.Stream, category: req.Category, expected: req.Expected, events: req.Events}
	if err := b.submit(o); err != nil {
		return varve.AppendResult{}, err
	}
	return o.res, nil
}

// Truncate implements [varve.Backend]. A deleted stream gives
// [varve.ErrStreamNotFound].
func (b *Backend) Truncate(ctx context.Context, stream string, before varve.Version) error {
	return b.submit(&op{ctx: ctx, kind: opTruncate, stream: stream, before: before})
}

// Delete implements [varve.Backend]. Deleting a stream also deletes its
// snapshot.
func (b *Backend) Delete(ctx context.Context, stream string, expected varve.ExpectedVersion, tombstone bool) error {
	return b.submit(&op{ctx: ctx, kind: opDelete, stream: stream, expected: expected, tombstone: tombstone})
}

// SaveSnapshot implements [varve.SnapshotStore].
func (b *Backend) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	return b.submit(&op{ctx: ctx, kind: opSnapshot, snapshot: s})
}

// SaveCheckpoint implements [varve.CheckpointStore].
func (b *Backend) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	return b.submit(&op{ctx: ctx, kind: opCheckpoint, stream: name, pos: pos})
}
