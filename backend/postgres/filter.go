package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
)

// ReadAllFiltered implements varve.FilteredReader. The first statement
// evaluates the $all horizon once and finds the last event below it; the
// page is read below that same horizon. Every event below it has ended
// (or belongs to no writer), so the page, from a later snapshot, holds
// every match below it, and the last event below it is the page's through;
// an event that commits later has a transaction id at or above it.
func (b *Backend) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	if err := b.begin(ctx); err != nil {
		return buf, varve.Position{}, err
	}
	h, through, err := b.horizonLast(ctx)
	if err != nil {
		return buf, varve.Position{}, err
	}
	f := q.Filter
	after, afterSeq := clamp(q.After.Commit), clamp(q.After.Seq)
	var rows pgx.Rows
	b.requests.Add(1)
	switch {
	case len(f.Categories) > 0:
		rows, err = b.pool.Query(ctx, b.sql.readByCategory, after, afterSeq, q.Limit, f.Categories, orNull(f.Types), orNull(f.StreamPrefixes), h)
	case len(f.Types) > 0:
		rows, err = b.pool.Query(ctx, b.sql.readByType, after, afterSeq, q.Limit, f.Types, nil, orNull(f.StreamPrefixes), h)
	default:
		rows, err = b.pool.Query(ctx, b.sql.readByPrefix, after, afterSeq, q.Limit, f.StreamPrefixes, h)
	}
	if err != nil {
		return buf, varve.Position{}, b.fail(ctx, err)
	}
	buf, _, err = b.scanAll(rows, buf, q.MaxBytes)
	if err != nil {
		return buf, varve.Position{}, b.fail(ctx, err)
	}
	return buf, through, nil
}

// horizonLast returns the $all horizon, evaluated once, and the position
// of the last event below it (Start when there is none).
func (b *Backend) horizonLast(ctx context.Context) (int64, varve.Position, error) {
	var h, tx, seq int64
	b.requests.Add(1)
	if err := b.pool.QueryRow(ctx, b.sql.horizonLast, b.floor.get()).Scan(&h, &tx, &seq); err != nil {
		return 0, varve.Position{}, b.fail(ctx, err)
	}
	b.floor.raise(h)
	return h, varve.Position{Commit: uint64(tx), Seq: uint64(seq)}, nil
}

func orNull(vs []string) []string {
	if len(vs) == 0 {
		return nil
	}
	return vs
}
