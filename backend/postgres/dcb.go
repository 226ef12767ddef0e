package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/varve-go/varve"
)

// condItem is an item of a condition as append_tagged reads it.
type condItem struct {
	Types []string `json:"types,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

// AppendIf implements varve.TagStore with the schema's append_tagged
// function (migration 8), which takes the locks of the condition's keys
// and of the events' tags, checks the condition and appends in one
// transaction.
func (b *Backend) AppendIf(ctx context.Context, req varve.AppendRequest, cond varve.AppendCondition) (varve.AppendResult, error) {
	if err := b.begin(ctx); err != nil {
		return varve.AppendResult{}, err
	}
	if b.cfg.Inline != nil {
		return b.appendInline(ctx, req, &cond)
	}
	return b.appendTagged(ctx, req, &cond)
}

func (b *Backend) appendTagged(ctx context.Context, req varve.AppendRequest, cond *varve.AppendCondition) (varve.AppendResult, error) {
	if b.version < tagsSince {
		return varve.AppendResult{}, varve.ErrNotSupported
	}
	args := argsPool.Get().(*appendArgs)
	defer args.release()
	qargs, err := taggedArgs(req, cond, args)
	if err != nil {
		return varve.AppendResult{}, err
	}
	if b.version >= taggedFastSince {
		res, ok, err := b.appendTaggedFast(ctx, req, qargs)
		if ok || err != nil {
			return res, err
		}
	}
	sql := b.appendTaggedSQL()
	for attempt := 0; ; attempt++ {
		var first, last, tx, seq, hitTx, hitSeq *int64
		b.requests.Add(1)
		err := b.pool.QueryRow(ctx, sql, qargs...).Scan(&first, &last, &tx, &seq, &hitTx, &hitSeq)
		switch {
		case err == nil && hitTx != nil:
			return varve.AppendResult{}, &varve.AppendConditionError{Position: varve.Position{Commit: uint64(*hitTx), Seq: uint64(*hitSeq)}}
		case err == nil && first != nil:
			b.committed()
			return varve.AppendResult{FirstVersion: varve.Version(*first), LastVersion: varve.Version(*last),
				Position: varve.Position{Commit: uint64(*tx), Seq: uint64(*seq)}}, nil
		case err == nil:
			return varve.AppendResult{}, errors.New("postgres: append_tagged returned no result")
		case isRace(err) && attempt < maxRaceRetries:
			continue
		}
		return varve.AppendResult{}, b.mapError(ctx, req.Stream, req.Expected, err)
	}
}

// taggedFastSince is the schema version from which the schema has
// append_tagged_fast (migration 10).
const taggedFastSince = 10

// appendTaggedFast tries append_tagged_fast: ok reports that it decided
// the append (committed it, or refused it on the condition); otherwise
// append_tagged decides.
func (b *Backend) appendTaggedFast(ctx context.Context, req varve.AppendRequest, qargs []any) (varve.AppendResult, bool, error) {
	var first, last, tx, seq, hitTx, hitSeq *int64
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, `SELECT o_first, o_last, o_tx, o_seq, o_hit_tx, o_hit_seq FROM `+b.schema+
		`.append_tagged_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, qargs...).Scan(&first, &last, &tx, &seq, &hitTx, &hitSeq)
	var pg *pgconn.PgError
	switch {
	case err == nil && hitTx != nil:
		return varve.AppendResult{}, true, &varve.AppendConditionError{Position: varve.Position{Commit: uint64(*hitTx), Seq: uint64(*hitSeq)}}
	case err == nil && first != nil:
		b.committed()
		return varve.AppendResult{FirstVersion: varve.Version(*first), LastVersion: varve.Version(*last),
			Position: varve.Position{Commit: uint64(*tx), Seq: uint64(*seq)}}, true, nil
	case err == nil, errors.As(err, &pg) && (pg.Code == codeUnique || pg.Code == codeDeadlock):
		return varve.AppendResult{}, false, nil // declined: append_tagged decides
	}
	return varve.AppendResult{}, true, b.mapError(ctx, req.Stream, req.Expected, err)
}

func (b *Backend) appendTaggedSQL() string {
	return `SELECT o_first, o_last, o_tx, o_seq, o_hit_tx, o_hit_seq FROM ` + b.schema +
		`.append_tagged($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`
}

// taggedArgs returns the arguments of the append_tagged function, with
// args filled with the events' columns.
func taggedArgs(req varve.AppendRequest, cond *varve.AppendCondition, args *appendArgs) ([]any, error) {
	tags := make([][]string, len(req.Events))
	for i := range req.Events {
		tags[i] = req.Events[i].Tags
		if tags[i] == nil {
			tags[i] = []string{}
		}
	}
	tagsJSON, err := json.Marshal(tags)
	if err != nil {
		return nil, err
	}
	var condJSON []byte
	var afterTx, afterSeq int64
	if cond != nil {
		items := make([]condItem, len(cond.FailIfEventsMatch.Items))
		for i, it := range cond.FailIfEventsMatch.Items {
			items[i] = condItem{Types: it.Types, Tags: it.Tags}
		}
		if condJSON, err = json.Marshal(items); err != nil {
			return nil, err
		}
		afterTx, afterSeq = clamp(cond.After.Commit), clamp(cond.After.Seq)
	}
	args.fill(req.Events)
	return []any{req.Stream, int64(req.Expected), args.ids, args.types, args.data, args.meta,
		req.Category, string(tagsJSON), nullJSON(condJSON), afterTx, afterSeq}, nil
}

func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// ReadQuery implements varve.TagStore. Candidates come in position order
// from a range scan per value, below the $all horizon: of event_tags for
// the first tag of each item that has tags, of the type index for each
// type of the others; the rest of each item is checked on them. The first
// round trip also reads the last position, as a filtered read does.
func (b *Backend) ReadQuery(ctx context.Context, q varve.QueryRequest, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	if err := b.begin(ctx); err != nil {
		return buf, varve.Position{}, err
	}
	if b.version < tagsSince {
		return buf, varve.Position{}, varve.ErrNotSupported
	}
	var tags, types []string
	for _, it := range q.Query.Items {
		if len(it.Tags) > 0 {
			tags = append(tags, it.Tags[0])
		} else {
			types = append(types, it.Types...)
		}
	}
	all := len(q.Query.Items) == 0
	h, through, err := b.horizonLast(ctx)
	if err != nil {
		return buf, varve.Position{}, err
	}
	after := q.After
	want := q.Limit
	for {
		size := max(want, 64)
		var rows pgx.Rows
		var err error
		b.requests.Add(1)
		if all {
			rows, err = b.pool.Query(ctx, b.sql.readAllBelow, clamp(after.Commit), clamp(after.Seq), size, h)
		} else {
			rows, err = b.pool.Query(ctx, b.sql.readByTags, clamp(after.Commit), clamp(after.Seq), size, orNull(tags), orNull(types), h)
		}
		if err != nil {
			return buf, varve.Position{}, b.fail(ctx, err)
		}
		cand, err := b.scanAll(rows, nil)
		if err != nil {
			return buf, varve.Position{}, b.fail(ctx, err)
		}
		for i := range cand {
			if q.Query.Match(&cand[i]) {
				buf = append(buf, cand[i])
				if want--; want == 0 {
					return buf, through, nil
				}
			}
		}
		if len(cand) < size {
			return buf, through, nil
		}
		after = cand[len(cand)-1].Position
	}
}
