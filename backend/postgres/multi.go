package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/varve-go/varve"
)

// MultiAppendAvailable implements varve.MultiAppender: always.
func (b *Backend) MultiAppendAvailable() bool { return true }

// AppendMulti implements varve.MultiAppender with one call of the
// schema's append_multi function, run again when another writer changed
// one of the streams under it.
func (b *Backend) AppendMulti(ctx context.Context, req varve.MultiAppendRequest) ([]varve.AppendResult, error) {
	if err := b.begin(ctx); err != nil {
		return nil, err
	}
	if b.cfg.Inline != nil {
		return b.appendMultiInline(ctx, req)
	}
	n := len(req.Appends)
	sql, args := b.multiQuery(req)
	for attempt := 0; ; attempt++ {
		b.requests.Add(1)
		rows, err := b.pool.Query(ctx, sql, args...)
		var res []varve.AppendResult
		if err == nil {
			for rows.Next() {
				var first, last, tx, seq int64
				if err := rows.Scan(&first, &last, &tx, &seq); err != nil {
					rows.Close()
					return nil, b.fail(ctx, err)
				}
				res = append(res, varve.AppendResult{FirstVersion: varve.Version(first), LastVersion: varve.Version(last),
					Position: varve.Position{Commit: uint64(tx), Seq: uint64(seq)}})
			}
			rows.Close()
			err = rows.Err()
		}
		if err == nil {
			if len(res) != n {
				return nil, fmt.Errorf("postgres: append_multi returned %d results for %d streams", len(res), n)
			}
			b.committed()
			if err := settled(ctx); err != nil {
				return nil, err
			}
			return res, nil
		}
		if isRace(err) && attempt < maxRaceRetries {
			continue
		}
		return nil, b.mapMultiError(ctx, req, err)
	}
}

// multiQuery returns the call of append_multi for req and its arguments.
func (b *Backend) multiQuery(req varve.MultiAppendRequest) (string, []any) {
	n := len(req.Appends)
	streams, expected, counts := make([]string, n), make([]int64, n), make([]int32, n)
	var ids [][16]byte
	var types []string
	var data, meta [][]byte
	for i, a := range req.Appends {
		streams[i], expected[i], counts[i] = a.Stream, int64(a.Expected), int32(len(a.Events))
		for _, e := range a.Events {
			ids, types = append(ids, e.ID), append(types, e.Type)
			data, meta = append(data, e.Data), append(meta, e.Metadata)
		}
	}
	var checks []string
	var checkExpected []int64
	for _, c := range req.Checks {
		checks, checkExpected = append(checks, c.Stream), append(checkExpected, int64(c.Expected))
	}
	return `SELECT o_first, o_last, o_tx, o_seq FROM ` + b.schema + `.append_multi($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		[]any{streams, expected, counts, req.Categories, ids, types, data, meta, checks, checkExpected}
}

// mapMultiError names the stream of a failed part, which append_multi
// gives in HINT.
func (b *Backend) mapMultiError(ctx context.Context, req varve.MultiAppendRequest, err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return b.fail(ctx, err)
	}
	stream := pg.Hint
	switch pg.Code {
	case codeWrongVersion:
		actual, perr := strconv.ParseUint(pg.Detail, 10, 64)
		if perr != nil {
			return fmt.Errorf("postgres: version conflict without a version (detail %q): %w", pg.Detail, err)
		}
		exp := varve.Any
		for _, a := range req.Appends {
			if a.Stream == stream {
				exp = a.Expected
			}
		}
		for _, c := range req.Checks {
			if c.Stream == stream {
				exp = c.Expected
			}
		}
		return &varve.WrongExpectedVersionError{Stream: stream, Expected: exp, Actual: actual}
	case codeDuplicate:
		return &varve.StreamError{Stream: stream, Err: varve.ErrDuplicateEvent}
	case codeTombstoned:
		return &varve.StreamError{Stream: stream, Err: varve.ErrStreamDeleted}
	}
	if pg.Code == codeUnique && pg.ConstraintName == "events_stream_id" {
		return varve.ErrDuplicateEvent
	}
	return b.fail(ctx, err)
}
