package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
)

// ReadAllFiltered implements varve.FilteredReader in one statement: it
// evaluates the $all horizon once, finds the last event below it and reads
// the page below it, all from one snapshot. Every event below the horizon
// has ended (or belongs to no writer), so the page holds every match below
// it, and the last event below it is the page's through; an event that
// commits later has a transaction id at or above it.
func (b *Backend) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	if err := b.begin(ctx); err != nil {
		return buf, varve.Position{}, err
	}
	f := q.Filter
	after, afterSeq := clamp(q.After.Commit), clamp(q.After.Seq)
	floor, inc := b.floor.get()
	var rows pgx.Rows
	var err error
	b.requests.Add(1)
	switch {
	case len(f.Categories) > 0:
		rows, err = b.pool.Query(ctx, b.sql.readByCategory, after, afterSeq, q.Limit, f.Categories, orNull(f.Types), orNull(f.StreamPrefixes), floor, inc)
	case len(f.Types) > 0:
		rows, err = b.pool.Query(ctx, b.sql.readByType, after, afterSeq, q.Limit, f.Types, nil, orNull(f.StreamPrefixes), floor, inc)
	default:
		rows, err = b.pool.Query(ctx, b.sql.readByPrefix, after, afterSeq, q.Limit, f.StreamPrefixes, floor, inc)
	}
	if err != nil {
		return buf, varve.Position{}, b.fail(ctx, err)
	}
	var h int64
	var through varve.Position
	head := func(v [][]byte) {
		h, through = int8At(v[0]), varve.Position{Commit: uint64(int8At(v[1])), Seq: uint64(int8At(v[2]))}
	}
	start := len(buf)
	buf, _, err = b.scanRows(rows, buf, q.MaxBytes, 3, head)
	if err == nil && h == 0 {
		err = errors.New("postgres: a filtered page without its horizon")
	}
	if err != nil {
		return buf[:start], varve.Position{}, b.fail(ctx, err)
	}
	b.floor.raise(h, inc)
	return buf, through, nil
}

// horizonLast returns the $all horizon, evaluated once, and the position
// of the last event below it (Start when there is none).
func (b *Backend) horizonLast(ctx context.Context) (int64, varve.Position, error) {
	var h, tx, seq int64
	b.requests.Add(1)
	floor, inc := b.floor.get()
	if err := b.pool.QueryRow(ctx, b.sql.horizonLast, floor, inc).Scan(&h, &tx, &seq); err != nil {
		return 0, varve.Position{}, b.fail(ctx, err)
	}
	b.floor.raise(h, inc)
	return h, varve.Position{Commit: uint64(tx), Seq: uint64(seq)}, nil
}

func orNull(vs []string) []string {
	if len(vs) == 0 {
		return nil
	}
	return vs
}
