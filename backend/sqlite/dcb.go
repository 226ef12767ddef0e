package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/varve-go/varve"
)

// insertTags indexes the tags of events, written from position first on.
func (w *writer) insertTags(evs []varve.Event, first int64) error {
	for i := range evs {
		for _, t := range evs[i].Tags {
			if _, err := w.c.exec(bg, qInsertTag, t, first+int64(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// A query read selects candidates in position order: for each item, the
// entries of its first tag in event_tags, or else the events of each of
// its types by the type index, merged by a compound SELECT. The rest of
// each item is checked on the candidates by varve.Query.Match. The
// statement depends only on the shape of the query. Parameters: ?1 after,
// ?2 limit, then one value per branch.
var querySQL sync.Map // string (the shape) -> string

func queryBranches(q varve.Query) (shape string, values []driver.Value) {
	var b strings.Builder
	for _, it := range q.Items {
		if len(it.Tags) > 0 {
			b.WriteByte('t')
			values = append(values, it.Tags[0])
			continue
		}
		for _, t := range it.Types {
			b.WriteByte('y')
			values = append(values, t)
		}
	}
	return b.String(), values
}

func queryStatement(shape string) string {
	if q, ok := querySQL.Load(shape); ok {
		return q.(string)
	}
	const cols = `e.position, s.name, e.version, e.event_id, e.type, e.data, e.metadata, e.recorded_at, e.tags`
	var q string
	if shape == "" {
		q = `SELECT ` + cols + ` FROM events e CROSS JOIN streams s ON s.id = e.stream_id WHERE e.position > ?1 ORDER BY e.position LIMIT ?2`
	} else {
		branches := make([]string, len(shape))
		for i, kind := range shape {
			p := "?" + strconv.Itoa(3+i)
			if kind == 't' {
				// t.position, equal to e.position, in the index's order.
				branches[i] = `SELECT t.position, ` + strings.TrimPrefix(cols, "e.position, ") + ` FROM event_tags t CROSS JOIN events e ON e.position = t.position CROSS JOIN streams s ON s.id = e.stream_id
WHERE t.tag = ` + p + ` AND t.position > ?1`
			} else {
				branches[i] = `SELECT ` + cols + ` FROM events e CROSS JOIN streams s ON s.id = e.stream_id
WHERE e.type = ` + p + ` AND e.position > ?1`
			}
		}
		q = strings.Join(branches, "\nUNION ALL\n") + "\nORDER BY 1 LIMIT ?2"
	}
	querySQL.Store(shape, q)
	return q
}

// query appends to buf at most limit events after after that match q,
// and stops after the one that spends maxBytes (0: no byte budget),
// reading candidates a page at a time on c. It returns the position of
// the last candidate read, and whether it read every candidate.
func query(ctx context.Context, c *conn, q varve.Query, after varve.Position, limit, maxBytes int, buf []varve.RecordedEvent) ([]varve.RecordedEvent, bool, error) {
	shape, values := queryBranches(q)
	stmt := queryStatement(shape)
	pos := int64(min(after.Seq, math.MaxInt64))
	want, left := limit, maxBytes
	for {
		size := max(want, 64)
		args := append([]driver.Value{pos, int64(size)}, values...)
		n := 0
		err := c.query(ctx, stmt, func(v []driver.Value) error {
			n++
			p := asInt(v[0])
			if p == pos {
				return nil // an event that two branches gave
			}
			pos = p
			if want == 0 {
				return nil
			}
			e := varve.RecordedEvent{
				Position: varve.Position{Seq: uint64(p)},
				Stream:   asString(v[1]),
				Version:  varve.Version(asInt(v[2])),
			}
			if err := scanEvent(v[3:], &e); err != nil {
				return err
			}
			if q.Match(&e) {
				buf = append(buf, e)
				if want--; spend(&left, &e) {
					want = 0
				}
				if want == 0 {
					return errStop
				}
			}
			return nil
		}, args...)
		if err != nil {
			return buf, false, err
		}
		if want == 0 {
			return buf, false, nil
		}
		if n < size {
			return buf, true, nil
		}
	}
}

// ReadQuery implements [varve.TagStore].
func (b *Backend) ReadQuery(ctx context.Context, q varve.QueryRequest, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	if q.After.Commit > 0 {
		return buf, q.After, nil
	}
	var last int64
	err := b.read(ctx, func(c *conn) error {
		if _, err := c.queryRow(ctx, qLastPosition, func(v []driver.Value) { last = asInt(v[0]) }); err != nil {
			return err
		}
		var err error
		buf, _, err = query(ctx, c, q.Query, q.After, q.Limit, q.MaxBytes, buf)
		return err
	})
	if err != nil {
		return buf, varve.Position{}, fmt.Errorf("sqlite: read query: %w", err)
	}
	return buf, varve.Position{Seq: uint64(last)}, nil
}

// AppendIf implements [varve.TagStore]: the writer checks the condition
// in the transaction that appends, and no other write runs in between.
func (b *Backend) AppendIf(ctx context.Context, req varve.AppendRequest, cond varve.AppendCondition) (varve.AppendResult, error) {
	o := &op{ctx: ctx, kind: opAppendIf, stream: req.Stream, category: req.Category, expected: req.Expected, events: req.Events, cond: cond}
	if err := b.submit(o); err != nil {
		return varve.AppendResult{}, err
	}
	return o.res, nil
}

// appendIf is a conditional append: a retry of a committed append returns
// its result; otherwise a matching event after the condition's position
// fails it before it writes.
func (w *writer) appendIf(o *op) (error, bool) {
	s, err := w.stream(o.stream)
	if err != nil {
		return fmt.Errorf("sqlite: append: read stream: %w", err), true
	}
	if s.exists {
		if ok, err, fatal := w.retried(s.id, o); ok || err != nil {
			return err, fatal
		}
	}
	if o.cond.After.Commit == 0 {
		hit, _, err := query(bg, w.c, o.cond.FailIfEventsMatch, o.cond.After, 1, 0, nil)
		if err != nil {
			return fmt.Errorf("sqlite: append: check the condition: %w", err), true
		}
		if len(hit) > 0 {
			return &varve.AppendConditionError{Position: hit[0].Position}, false
		}
	}
	return w.appendTo(o, s)
}

// NumberPositions implements [varve.PositionNumbers]: an event's number is
// its position.
func (b *Backend) NumberPositions(ctx context.Context, ps []varve.Position) ([]uint64, error) {
	if b.closed.Load() {
		return nil, varve.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]uint64, len(ps))
	for i, p := range ps {
		if p.Commit != 0 || p.Seq > varve.MaxPositionNumber {
			return nil, fmt.Errorf("%w: position %s has no number: SQLite numbers positions up to %d", varve.ErrInvalidArgument, p, uint64(varve.MaxPositionNumber))
		}
		out[i] = p.Seq
	}
	return out, nil
}

// PositionOfNumber implements [varve.PositionNumbers].
func (b *Backend) PositionOfNumber(ctx context.Context, n uint64) (varve.Position, error) {
	if b.closed.Load() {
		return varve.Position{}, varve.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return varve.Position{}, err
	}
	return varve.Position{Seq: n}, nil
}
