package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/varve-go/varve"
)

// appendArgs are the column arrays of one append, pooled.
type appendArgs struct {
	ids   [][16]byte
	types []string
	data  [][]byte
	meta  [][]byte
}

var argsPool = sync.Pool{New: func() any { return new(appendArgs) }}

func (a *appendArgs) fill(evs []varve.Event) {
	a.ids, a.types, a.data, a.meta = a.ids[:0], a.types[:0], a.data[:0], a.meta[:0]
	for i := range evs {
		e := &evs[i]
		a.ids = append(a.ids, e.ID)
		a.types = append(a.types, e.Type)
		a.data = append(a.data, e.Data)
		a.meta = append(a.meta, e.Metadata)
	}
}

func (a *appendArgs) release() {
	if cap(a.ids) > 1024 {
		return
	}
	clear(a.types)
	clear(a.data)
	clear(a.meta)
	argsPool.Put(a)
}

// Append writes the events in one statement when it can: the fast path
// (queries.appendOne, appendMany) covers an append at the expected version
// to a live stream or a new one. When it declines, or trips a unique index
// (an idempotent retry, a duplicate id, a concurrent writer), the schema's
// append function decides: it recognizes a retry by the first event id,
// checks the expected version, raises the conflicts that the sentinels map,
// or appends. A conflict or a retry therefore costs a second round trip.
func (b *Backend) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	if err := b.begin(ctx); err != nil {
		return varve.AppendResult{}, err
	}
	if b.cfg.Inline != nil {
		return b.appendInline(ctx, req, nil)
	}
	for i := range req.Events {
		if len(req.Events[i].Tags) > 0 {
			return b.appendTagged(ctx, req, nil)
		}
	}
	args := argsPool.Get().(*appendArgs)
	defer args.release()
	res, ok, err := b.appendFast(ctx, req, args)
	for attempt := 0; !ok && err == nil; attempt++ {
		res, err = b.appendSlow(ctx, req, args)
		// Another writer changed the stream's row between the function's
		// read and its write; the next attempt sees that writer's commit.
		if isRace(err) && attempt < maxRaceRetries {
			err = nil
		} else {
			ok = true
		}
	}
	if err != nil {
		return varve.AppendResult{}, b.mapError(ctx, req.Stream, req.Expected, err)
	}
	b.committed()
	if err := settled(ctx); err != nil {
		return varve.AppendResult{}, err
	}
	return res, nil
}

// maxRaceRetries bounds the retries of a statement that lost a race for a
// stream's row; each retry sees the winner's commit, and only a writer that
// commits between the function's read and its compare-and-set can make it
// lose again.
const maxRaceRetries = 16

func (b *Backend) appendFast(ctx context.Context, req varve.AppendRequest, args *appendArgs) (varve.AppendResult, bool, error) {
	var row pgx.Row
	b.requests.Add(1)
	if len(req.Events) == 1 {
		e := &req.Events[0]
		row = b.pool.QueryRow(ctx, b.sql.appendOne, b.appendArgs(req, [16]byte(e.ID), e.Type, e.Data, e.Metadata)...)
	} else {
		args.fill(req.Events)
		row = b.pool.QueryRow(ctx, b.sql.appendMany, b.appendArgs(req, args.ids, args.types, args.data, args.meta)...)
	}
	var last, tx, seq int64
	err := row.Scan(&last, &tx, &seq)
	var pg *pgconn.PgError
	switch {
	case err == nil:
		return varve.AppendResult{
			FirstVersion: varve.Version(last) - varve.Version(len(req.Events)) + 1,
			LastVersion:  varve.Version(last),
			Position:     varve.Position{Commit: uint64(tx), Seq: uint64(seq)},
		}, true, nil
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pg) && (pg.Code == codeUnique || pg.Code == codeDeadlock):
		return varve.AppendResult{}, false, nil
	}
	return varve.AppendResult{}, true, err
}

func (b *Backend) appendSlow(ctx context.Context, req varve.AppendRequest, args *appendArgs) (varve.AppendResult, error) {
	args.fill(req.Events)
	var first, last, tx, seq int64
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, b.sql.append, b.appendArgs(req, args.ids, args.types, args.data, args.meta)...).Scan(&first, &last, &tx, &seq)
	if err != nil {
		return varve.AppendResult{}, err
	}
	return varve.AppendResult{
		FirstVersion: varve.Version(first),
		LastVersion:  varve.Version(last),
		Position:     varve.Position{Commit: uint64(tx), Seq: uint64(seq)},
	}, nil
}

// appendArgs returns the arguments of an append statement: the stream, the
// expected version, the events' ids, types, data and metadata, and the
// category.
func (b *Backend) appendArgs(req varve.AppendRequest, ids, types, data, meta any) []any {
	return []any{req.Stream, int64(req.Expected), ids, types, data, meta, req.Category}
}
