package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
)

// InlineFunc is an inline projection ([Config.Inline]): it writes a read
// model in tx, the transaction of the append that wrote events, so that
// the read model and the events commit together or not at all.
//
// events are the events that append wrote, in position order, with their
// stream, version, position and time: one stream's, or several streams'
// for a multi-stream append. That includes varve's own system streams
// (names starting with "$"): filter on Stream. An append recognised as an
// exact retry of a committed one writes nothing and does not call the
// hook; nor does an append that fails.
//
// When the hook returns an error, the append fails with an error that
// wraps [varve.ErrInline] and the hook's error, and nothing commits. When
// the append loses a race with another writer of the stream (PostgreSQL
// aborts the transaction), the whole transaction is tried again, and the
// hook with it: only the writes of the run that commits remain. tx must
// not be committed or rolled back by the hook. The stream's row stays
// locked until the hook returns, so keep it short.
//
// With a hook, an append runs in an explicit transaction: BEGIN, the
// append and the read-back of its positions (one round trip), the hook's
// statements, COMMIT; without one it is a single statement.
type InlineFunc func(ctx context.Context, tx pgx.Tx, events []varve.RecordedEvent) error

// inlineError is the error of a failing hook.
type inlineError struct{ err error }

func (e *inlineError) Error() string {
	return "postgres: " + varve.ErrInline.Error() + ": " + e.err.Error()
}
func (e *inlineError) Unwrap() []error { return []error{varve.ErrInline, e.err} }

// inlineRead reads back the rows that the current transaction wrote to
// the streams $1 (the last $2 of each), in position order: none for an
// append that was a retry.
func (b *Backend) inlineRead() string {
	return `SELECT l.stream, l.version, l.tx, l.seq, l.recorded_at
FROM unnest($1::text[], $2::int[]) AS a(stream, n)
CROSS JOIN LATERAL (
    SELECT e.stream, e.version, e.tx, e.seq, e.recorded_at FROM ` + b.schema + `.events e
    WHERE e.stream = a.stream ORDER BY e.version DESC LIMIT a.n
) l
WHERE l.tx = pg_current_xact_id()::text::bigint
ORDER BY l.tx, l.seq`
}

// inlineTx runs write, then the hook on the events it wrote, in one
// transaction, again when the transaction loses a race.
func (b *Backend) inlineTx(ctx context.Context, write func(tx pgx.Tx) ([]varve.RecordedEvent, error)) error {
	for attempt := 0; ; attempt++ {
		b.requests.Add(1)
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			evs, err := write(tx)
			if err != nil || len(evs) == 0 {
				return err
			}
			if err := callInline(ctx, b.cfg.Inline, tx, evs); err != nil {
				return &inlineError{err}
			}
			return nil
		})
		if isRace(err) && attempt < maxRaceRetries {
			continue
		}
		return err
	}
}

func callInline(ctx context.Context, h InlineFunc, tx pgx.Tx, evs []varve.RecordedEvent) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return h(ctx, tx, evs)
}

// inlineEvents pairs the events of the appends with the rows that
// inlineRead returned for them.
func inlineEvents(rows pgx.Rows, appends []varve.StreamAppend) ([]varve.RecordedEvent, error) {
	next := make(map[string]int, len(appends))
	byStream := make(map[string][]varve.Event, len(appends))
	total := 0
	for _, a := range appends {
		byStream[a.Stream] = a.Events
		total += len(a.Events)
	}
	var evs []varve.RecordedEvent
	for rows.Next() {
		var stream string
		var version, tx, seq int64
		var at time.Time
		if err := rows.Scan(&stream, &version, &tx, &seq, &at); err != nil {
			return nil, err
		}
		i := next[stream]
		src := byStream[stream]
		if i >= len(src) {
			return nil, fmt.Errorf("postgres: inline projection: more rows than events of stream %q", stream)
		}
		next[stream] = i + 1
		e := &src[i]
		evs = append(evs, varve.RecordedEvent{ID: e.ID, Type: e.Type, Data: e.Data, Metadata: e.Metadata, Tags: e.Tags,
			Stream: stream, Version: varve.Version(version), Position: varve.Position{Commit: uint64(tx), Seq: uint64(seq)}, RecordedAt: at})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(evs) != 0 && len(evs) != total {
		return nil, fmt.Errorf("postgres: inline projection: the append wrote %d of its %d events", len(evs), total)
	}
	return evs, nil
}

// appendInline is Append and AppendIf (cond not nil) with Config.Inline:
// the append function of the schema (append, or append_tagged for tags
// and conditions) and the read-back of its rows in one round trip of a
// transaction that then runs the hook.
func (b *Backend) appendInline(ctx context.Context, req varve.AppendRequest, cond *varve.AppendCondition) (varve.AppendResult, error) {
	tagged := cond != nil
	for i := range req.Events {
		tagged = tagged || len(req.Events[i].Tags) > 0
	}
	args := argsPool.Get().(*appendArgs)
	defer args.release()
	sql := b.sql.append
	var qargs []any
	if tagged {
		var err error
		if qargs, err = taggedArgs(req, cond, args); err != nil {
			return varve.AppendResult{}, err
		}
		sql = b.appendTaggedSQL()
	} else {
		args.fill(req.Events)
		qargs = b.appendArgs(req, args.ids, args.types, args.data, args.meta)
	}
	var res varve.AppendResult
	err := b.inlineTx(ctx, func(tx pgx.Tx) (evs []varve.RecordedEvent, err error) {
		batch := &pgx.Batch{}
		batch.Queue(sql, qargs...)
		batch.Queue(b.inlineRead(), []string{req.Stream}, []int32{int32(len(req.Events))})
		br := tx.SendBatch(ctx, batch)
		defer func() {
			if cerr := br.Close(); err == nil && cerr != nil {
				evs, err = nil, cerr
			}
		}()
		var first, last, txid, seq, hitTx, hitSeq *int64
		dest := []any{&first, &last, &txid, &seq}
		if tagged {
			dest = append(dest, &hitTx, &hitSeq)
		}
		if err := br.QueryRow().Scan(dest...); err != nil {
			return nil, err
		}
		switch {
		case hitTx != nil:
			return nil, &varve.AppendConditionError{Position: varve.Position{Commit: uint64(*hitTx), Seq: uint64(*hitSeq)}}
		case first == nil:
			return nil, errors.New("postgres: the append function returned no result")
		}
		res = varve.AppendResult{FirstVersion: varve.Version(*first), LastVersion: varve.Version(*last),
			Position: varve.Position{Commit: uint64(*txid), Seq: uint64(*seq)}}
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return inlineEvents(rows, []varve.StreamAppend{{Stream: req.Stream, Events: req.Events}})
	})
	if err != nil {
		return varve.AppendResult{}, b.inlineFailure(err, func(err error) error { return b.mapError(ctx, req.Stream, req.Expected, err) })
	}
	b.committed()
	if err := settled(ctx); err != nil {
		return varve.AppendResult{}, err
	}
	return res, nil
}

// appendMultiInline is AppendMulti with Config.Inline.
func (b *Backend) appendMultiInline(ctx context.Context, req varve.MultiAppendRequest) ([]varve.AppendResult, error) {
	sql, args := b.multiQuery(req)
	streams, counts := make([]string, len(req.Appends)), make([]int32, len(req.Appends))
	for i, a := range req.Appends {
		streams[i], counts[i] = a.Stream, int32(len(a.Events))
	}
	var res []varve.AppendResult
	err := b.inlineTx(ctx, func(tx pgx.Tx) (evs []varve.RecordedEvent, err error) {
		batch := &pgx.Batch{}
		batch.Queue(sql, args...)
		batch.Queue(b.inlineRead(), streams, counts)
		br := tx.SendBatch(ctx, batch)
		defer func() {
			if cerr := br.Close(); err == nil && cerr != nil {
				evs, err = nil, cerr
			}
		}()
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		res = res[:0]
		for rows.Next() {
			var first, last, txid, seq int64
			if err := rows.Scan(&first, &last, &txid, &seq); err != nil {
				rows.Close()
				return nil, err
			}
			res = append(res, varve.AppendResult{FirstVersion: varve.Version(first), LastVersion: varve.Version(last),
				Position: varve.Position{Commit: uint64(txid), Seq: uint64(seq)}})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if len(res) != len(req.Appends) {
			return nil, fmt.Errorf("postgres: append_multi returned %d results for %d streams", len(res), len(req.Appends))
		}
		if rows, err = br.Query(); err != nil {
			return nil, err
		}
		defer rows.Close()
		return inlineEvents(rows, req.Appends)
	})
	if err != nil {
		return nil, b.inlineFailure(err, func(err error) error { return b.mapMultiError(ctx, req, err) })
	}
	b.committed()
	if err := settled(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

// inlineFailure returns the error of an inline append: the hook's and a
// failed condition as they are, others mapped.
func (b *Backend) inlineFailure(err error, mapErr func(error) error) error {
	var ie *inlineError
	var ce *varve.AppendConditionError
	if errors.As(err, &ie) || errors.As(err, &ce) {
		return err
	}
	return mapErr(err)
}
