package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
)

// ReadAllFiltered implements varve.FilteredReader. One round trip sends
// two statements: the last position below the horizon, then the page. An
// event at or before that position has ended below the first statement's
// horizon, so the page, read from a later snapshot, holds it if it
// matches; an event that commits later has a transaction id at or above
// that horizon, so it comes after the position.
func (b *Backend) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	if err := b.begin(ctx); err != nil {
		return buf, varve.Position{}, err
	}
	if b.sql.readByCategory == "" {
		return buf, varve.Position{}, varve.ErrNotSupported
	}
	f := q.Filter
	after, afterSeq := clamp(q.After.Commit), clamp(q.After.Seq)
	var batch pgx.Batch
	batch.Queue(b.sql.lastPosition)
	switch {
	case len(f.Categories) > 0:
		batch.Queue(b.sql.readByCategory, after, afterSeq, q.Limit, f.Categories, orNull(f.Types), orNull(f.StreamPrefixes))
	case len(f.Types) > 0:
		batch.Queue(b.sql.readByType, after, afterSeq, q.Limit, f.Types, nil, orNull(f.StreamPrefixes))
	default:
		batch.Queue(b.sql.readByPrefix, after, afterSeq, q.Limit, f.StreamPrefixes)
	}
	b.requests.Add(1)
	res := b.pool.SendBatch(ctx, &batch)
	defer res.Close()
	var tx, seq int64
	if err := res.QueryRow().Scan(&tx, &seq); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return buf, varve.Position{}, b.fail(ctx, err)
	}
	rows, err := res.Query()
	if err != nil {
		return buf, varve.Position{}, b.fail(ctx, err)
	}
	buf, err = b.scanAll(rows, buf)
	if err != nil {
		return buf, varve.Position{}, b.fail(ctx, err)
	}
	if err := res.Close(); err != nil {
		return buf, varve.Position{}, b.fail(ctx, err)
	}
	return buf, varve.Position{Commit: uint64(tx), Seq: uint64(seq)}, nil
}

func orNull(vs []string) []string {
	if len(vs) == 0 {
		return nil
	}
	return vs
}
