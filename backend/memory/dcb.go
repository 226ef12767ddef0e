package memory

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
)

// ReadQuery implements varve.TagStore: for each item of the query, the
// index list of its rarest tag, or else of its types, merged by position;
// a query without items reads the log.
func (b *Backend) ReadQuery(ctx context.Context, q varve.QueryRequest, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	if err := b.check(ctx); err != nil {
		return buf, varve.Position{}, err
	}
	l := &b.log
	l.mu.RLock()
	defer l.mu.RUnlock()
	buf = l.query(q.Query, q.After, newBudget(q.Limit, q.MaxBytes), buf)
	return buf, varve.Position{Seq: l.seq}, nil
}

// query reads the records of the query after after; the caller holds the
// log's lock.
func (l *eventLog) query(q varve.Query, after varve.Position, room budget, buf []varve.RecordedEvent) []varve.RecordedEvent {
	lists := [][]*record{l.recs}
	if len(q.Items) > 0 {
		lists = lists[:0]
		for _, it := range q.Items {
			if len(it.Tags) > 0 {
				rarest := l.byTag[it.Tags[0]]
				for _, t := range it.Tags[1:] {
					if rs := l.byTag[t]; len(rs) < len(rarest) {
						rarest = rs
					}
				}
				lists = append(lists, rarest)
				continue
			}
			for _, t := range it.Types {
				lists = append(lists, l.byType[t])
			}
		}
	}
	return merge(lists, after, room, func(r *record) bool { return q.Match(&r.ev) }, buf)
}

// AppendIf implements varve.TagStore: the condition is checked under the
// log's lock, which every commit takes, right before the append's records
// are written.
func (b *Backend) AppendIf(ctx context.Context, req varve.AppendRequest, cond varve.AppendCondition) (varve.AppendResult, error) {
	return b.append(ctx, req, func() error {
		if hit := b.log.query(cond.FailIfEventsMatch, cond.After, newBudget(1, 0), nil); len(hit) > 0 {
			return &varve.AppendConditionError{Position: hit[0].Position}
		}
		return nil
	})
}

// NumberPositions implements varve.PositionNumbers: an event's number is
// its position's sequence number.
func (b *Backend) NumberPositions(ctx context.Context, ps []varve.Position) ([]uint64, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	out := make([]uint64, len(ps))
	for i, p := range ps {
		if p.Commit != 0 || p.Seq > varve.MaxPositionNumber {
			return nil, fmt.Errorf("%w: position %s has no number: memory numbers sequence numbers up to %d", varve.ErrInvalidArgument, p, uint64(varve.MaxPositionNumber))
		}
		out[i] = p.Seq
	}
	return out, nil
}

// PositionOfNumber implements varve.PositionNumbers.
func (b *Backend) PositionOfNumber(ctx context.Context, n uint64) (varve.Position, error) {
	if err := b.check(ctx); err != nil {
		return varve.Position{}, err
	}
	return varve.Position{Seq: n}, nil
}
