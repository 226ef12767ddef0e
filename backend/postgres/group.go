package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/varve-go/varve"
)

// defaultLanes is how many units of work, appends alone or groups, the
// grouper lets run at once before it queues appends for a group; see
// grouper.
const defaultLanes = 2

// grouper is group commit. An append that finds fewer than lanes units in
// flight and nobody queued runs alone at once (appendAlone, the one-
// statement fast path); otherwise it queues, and a committer goroutine takes
// the queue (up to max appends, one per stream) as one transaction when a
// unit ends. So a group forms only from appends that arrived while earlier
// ones were in flight, and no append waits for a timer.
type grouper struct {
	b     *Backend
	max   int
	lanes int
	key   [2]int32 // the schema's writer lock

	mu       sync.Mutex
	inflight int       // appends alone and groups running
	queue    []*member // in arrival order
	closed   bool
	wake     chan struct{} // capacity 1

	groups, members atomic.Uint64 // groups committed and their appends
	alone           atomic.Uint64 // appends that ran alone at once
}

// member is one append queued for a group.
type member struct {
	req  varve.AppendRequest
	args *appendArgs // the arrays of an append of several events
	res  varve.AppendResult
	err  error
	redo bool // the group did not write it: run it alone
	done chan struct{}
}

func newGrouper(b *Backend) *grouper {
	return &grouper{
		b:     b,
		max:   b.cfg.MaxGroup,
		lanes: defaultLanes,
		key:   [2]int32{int32(b.seed >> 32), int32(b.seed & 0x7fffffff)},
		wake:  make(chan struct{}, 1),
	}
}

func (g *grouper) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// append runs req alone when nothing else waits and a lane is free, and
// otherwise in the next group. A caller whose context ends while its append
// is queued gets the context's error and the append is never sent; once a
// committer has taken it, the caller still gets the context's error at
// once, and the append commits or not with its group, like an append whose
// caller went away while its statement ran. An append the group did not
// write (it declined or failed: a wrong expected version, an idempotent
// retry, a duplicate id, a tombstone, a writer in between) runs the append
// function alone, which decides it as it decides any other.
func (g *grouper) append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return varve.AppendResult{}, varve.ErrClosed
	}
	if g.inflight < g.lanes && len(g.queue) == 0 {
		g.inflight++
		g.mu.Unlock()
		g.alone.Add(1)
		defer g.release()
		return g.b.appendAlone(ctx, req, true)
	}
	m := &member{req: req, done: make(chan struct{})}
	g.queue = append(g.queue, m)
	g.mu.Unlock()
	g.signal()
	select {
	case <-m.done:
	case <-ctx.Done():
		g.mu.Lock()
		if i := slices.Index(g.queue, m); i >= 0 {
			g.queue = slices.Delete(g.queue, i, i+1)
		}
		g.mu.Unlock()
		return varve.AppendResult{}, ctx.Err()
	}
	switch {
	case m.redo:
		return g.b.appendAlone(ctx, req, false)
	case m.err != nil:
		return varve.AppendResult{}, g.b.mapError(ctx, req.Stream, req.Expected, m.err)
	}
	return m.res, nil
}

// release ends a unit and wakes a committer if appends wait.
func (g *grouper) release() {
	g.mu.Lock()
	g.inflight--
	waiting := len(g.queue) > 0
	g.mu.Unlock()
	if waiting {
		g.signal()
	}
}

// take removes the next group from the queue: the first append of each
// stream, up to max, sorted by stream. Appends to a stream already in the
// group wait for the next one (their order is kept). A group locks its
// streams' rows in the order of their names, and an append alone locks
// one, so groups in flight together cannot deadlock.
func (g *grouper) take() []*member {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || len(g.queue) == 0 || g.inflight >= g.lanes {
		return nil
	}
	var grp, rest []*member
	for _, m := range g.queue {
		if len(grp) < g.max && !slices.ContainsFunc(grp, func(o *member) bool { return o.req.Stream == m.req.Stream }) {
			grp = append(grp, m)
		} else {
			rest = append(rest, m)
		}
	}
	g.queue = rest
	g.inflight++
	slices.SortFunc(grp, func(a, b *member) int { return strings.Compare(a.req.Stream, b.req.Stream) })
	return grp
}

// run is a committer goroutine: it commits groups while appends wait and a
// lane is free, until Close.
func (g *grouper) run() {
	defer g.b.wg.Done()
	for {
		select {
		case <-g.b.life.Done():
			return
		case <-g.wake:
		}
		for grp := g.take(); grp != nil; grp = g.take() {
			g.commit(grp)
			g.release()
		}
	}
}

// close fails the appends still queued; a group in flight ends with the
// backend's context.
func (g *grouper) close() {
	g.mu.Lock()
	g.closed = true
	q := g.queue
	g.queue = nil
	g.mu.Unlock()
	for _, m := range q {
		m.err = varve.ErrClosed
		close(m.done)
	}
}

// commit runs grp in one transaction on the backend's context, so that no
// caller's cancellation touches the others, and hands each member its
// outcome.
func (g *grouper) commit(grp []*member) {
	err := g.execOne(g.b.life, grp)
	if appendFailed(err) {
		// An append of the group failed (an idempotent retry, a duplicate
		// id, ...) and took the statement with it: run the group again
		// with a savepoint for each append.
		for _, m := range grp {
			m.res, m.redo = varve.AppendResult{}, false
		}
		err = g.exec(g.b.life, grp)
	}
	if err == nil {
		g.b.committed()
		g.groups.Add(1)
		g.members.Add(uint64(len(grp)))
	}
	for _, m := range grp {
		if err != nil {
			m.err, m.redo = err, false
		}
		if m.args != nil {
			m.args.release()
			m.args = nil
		}
		close(m.done)
	}
}

// appendFailed reports whether err is one an append's data can cause: a
// unique violation or another broken rule (classes 22 and 23), a value over
// a limit (54), a deadlock (40). A lost session or an administrator's
// command (a FATAL error, class 57, 08, ...) is the whole group's.
func appendFailed(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Severity != "ERROR" {
		return false
	}
	switch pg.Code[:2] {
	case "22", "23", "40", "54":
		return true
	}
	return false
}

// groupArgs are the arrays of the group statement, reused by a committer.
type groupArgs struct {
	streams, cats, types []string
	expected, n, m, j    []int64
	ids                  [][16]byte
	data, meta           [][]byte
}

// execOne appends the group in one statement, its own transaction, as the
// fast path appends one stream: its snapshot is taken before it has an id,
// and the default of the streams' rows takes the writer lock before it
// gets one. A member without a row back declined (redo); an error is the
// whole statement's, which wrote nothing.
func (g *grouper) execOne(ctx context.Context, grp []*member) error {
	var a groupArgs
	for i, mb := range grp {
		req := &mb.req
		a.streams = append(a.streams, req.Stream)
		a.expected = append(a.expected, int64(req.Expected))
		a.n = append(a.n, int64(len(req.Events)))
		a.cats = append(a.cats, req.Category)
		for k := range req.Events {
			e := &req.Events[k]
			a.m = append(a.m, int64(i+1))
			a.j = append(a.j, int64(k+1))
			a.ids = append(a.ids, e.ID)
			a.types = append(a.types, e.Type)
			a.data = append(a.data, e.Data)
			a.meta = append(a.meta, e.Metadata)
		}
	}
	g.b.requests.Add(1)
	rows, err := g.b.pool.Query(ctx, g.b.sql.group, a.streams, a.expected, a.n, a.cats, a.m, a.j, a.ids, a.types, a.data, a.meta)
	if err != nil {
		return err
	}
	for _, mb := range grp {
		mb.redo = true
	}
	for rows.Next() {
		var stream string
		var last, tx, seq int64
		if err := rows.Scan(&stream, &last, &tx, &seq); err != nil {
			rows.Close()
			return err
		}
		i := slices.IndexFunc(grp, func(mb *member) bool { return mb.req.Stream == stream })
		if i < 0 {
			continue
		}
		mb := grp[i]
		n := varve.Version(len(mb.req.Events))
		mb.res = varve.AppendResult{
			FirstVersion: varve.Version(last) - n + 1,
			LastVersion:  varve.Version(last),
			Position:     varve.Position{Commit: uint64(tx), Seq: uint64(seq)},
		}
		mb.redo = false
	}
	rows.Close()
	return rows.Err()
}

// exec sends the group in one pipeline: BEGIN, the writer lock (taken at
// the top level, before the transaction has an id, and so held until it
// ends whatever savepoint is rolled back), then for each append SAVEPOINT,
// the fast statement and RELEASE, and COMMIT. An append that declines (no
// row) keeps its savepoint released, having written nothing; one whose
// statement fails aborts the rest of the pipeline, so exec rolls back to its
// savepoint and sends the appends after it in the next pipeline. Any other
// error ends the transaction (the pool drops a connection left in one) and
// is every member's.
func (g *grouper) exec(ctx context.Context, grp []*member) error {
	conn, err := g.b.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	sql := &g.b.sql
	for start, begun := 0, false; ; {
		batch := &pgx.Batch{}
		if !begun {
			batch.Queue("BEGIN")
			batch.Queue("SELECT pg_advisory_xact_lock_shared($1::int4, $2::int4)", g.key[0], g.key[1])
		} else {
			// On its own: the next pipeline may have statements to
			// prepare, which an aborted transaction refuses.
			g.b.requests.Add(1)
			if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT g"); err != nil {
				return err
			}
		}
		for _, m := range grp[start:] {
			batch.Queue("SAVEPOINT g")
			if len(m.req.Events) == 1 {
				e := &m.req.Events[0]
				batch.Queue(sql.groupOne, g.b.appendArgs(m.req, [16]byte(e.ID), e.Type, e.Data, e.Metadata)...)
			} else {
				if m.args == nil {
					m.args = argsPool.Get().(*appendArgs)
					m.args.fill(m.req.Events)
				}
				a := m.args
				batch.Queue(sql.groupMany, g.b.appendArgs(m.req, a.ids, a.types, a.data, a.meta)...)
			}
			batch.Queue("RELEASE SAVEPOINT g")
		}
		batch.Queue("COMMIT")
		g.b.requests.Add(1)
		br := conn.SendBatch(ctx, batch)
		failed, err := readGroup(br, grp[start:], !begun)
		if cerr := br.Close(); err == nil && failed < 0 {
			err = cerr
		}
		if err != nil || failed < 0 {
			return err
		}
		start, begun = start+failed+1, true
	}
}

// readGroup reads the results of one pipeline of exec: the index in ms of
// the append whose statement failed (and which is to run alone), or -1 when
// the pipeline ran to its COMMIT.
func readGroup(br pgx.BatchResults, ms []*member, first bool) (int, error) {
	if first { // BEGIN and the lock
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return -1, err
			}
		}
	}
	for i, m := range ms {
		if _, err := br.Exec(); err != nil {
			return -1, err
		}
		var last, tx, seq int64
		err := br.QueryRow().Scan(&last, &tx, &seq)
		switch {
		case err == nil:
			n := varve.Version(len(m.req.Events))
			m.res = varve.AppendResult{
				FirstVersion: varve.Version(last) - n + 1,
				LastVersion:  varve.Version(last),
				Position:     varve.Position{Commit: uint64(tx), Seq: uint64(seq)},
			}
		case errors.Is(err, pgx.ErrNoRows):
			m.redo = true
		case appendFailed(err):
			m.redo = true
			return i, nil
		default:
			return -1, err
		}
		if _, err := br.Exec(); err != nil {
			return -1, err
		}
	}
	_, err := br.Exec()
	return -1, err
}
