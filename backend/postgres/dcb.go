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
// function (code/tagged.sql), which takes the locks of the condition's keys
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
	args := argsPool.Get().(*appendArgs)
	defer args.release()
	qargs, err := taggedArgs(req, cond, args)
	if err != nil {
		return varve.AppendResult{}, err
	}
	if b.sql.taggedAppend != "" && pipelinable(cond) {
		res, ok, err := b.appendTaggedPipelined(ctx, req, cond, qargs)
		if ok || err != nil {
			return res, err
		}
	} else {
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
			if err := settled(ctx); err != nil {
				return varve.AppendResult{}, err
			}
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

// appendTaggedFast tries append_tagged_fast: ok reports that it decided
// the append (committed it, or refused it on the condition); otherwise
// append_tagged decides.
func (b *Backend) appendTaggedFast(ctx context.Context, req varve.AppendRequest, qargs []any) (varve.AppendResult, bool, error) {
	var o taggedOutcome
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, `SELECT o_first, o_last, o_tx, o_seq, o_hit_tx, o_hit_seq FROM `+b.schema+
		`.append_tagged_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, qargs...).Scan(o.dest()...)
	return b.decided(ctx, req, o, err)
}

// taggedOutcome is what a one-round-trip tagged append returns: the
// append's versions and position, or the condition's first match, or
// neither (declined).
type taggedOutcome struct{ first, last, tx, seq, hitTx, hitSeq *int64 }

func (o *taggedOutcome) dest() []any {
	return []any{&o.first, &o.last, &o.tx, &o.seq, &o.hitTx, &o.hitSeq}
}

// decided maps the outcome of a one-round-trip tagged append: ok reports
// that it decided the append; a decline, a unique violation or a deadlock
// leave it to append_tagged.
func (b *Backend) decided(ctx context.Context, req varve.AppendRequest, o taggedOutcome, err error) (varve.AppendResult, bool, error) {
	var pg *pgconn.PgError
	switch {
	case err == nil && o.hitTx != nil:
		return varve.AppendResult{}, true, &varve.AppendConditionError{Position: varve.Position{Commit: uint64(*o.hitTx), Seq: uint64(*o.hitSeq)}}
	case err == nil && o.first != nil:
		b.committed()
		if err := settled(ctx); err != nil {
			return varve.AppendResult{}, true, err
		}
		return varve.AppendResult{FirstVersion: varve.Version(*o.first), LastVersion: varve.Version(*o.last),
			Position: varve.Position{Commit: uint64(*o.tx), Seq: uint64(*o.seq)}}, true, nil
	case err == nil, errors.As(err, &pg) && (pg.Code == codeUnique || pg.Code == codeDeadlock):
		return varve.AppendResult{}, false, nil // declined: append_tagged decides
	}
	return varve.AppendResult{}, true, b.mapError(ctx, req.Stream, req.Expected, err)
}

// pipelinable reports whether the pipelined tagged append can take a
// condition: one whose every item names a tag, so that its locks are on
// tags. A condition over types alone, or over everything, takes the
// schema's writer lock exclusively, which append_tagged_fast does.
func pipelinable(cond *varve.AppendCondition) bool {
	if cond == nil {
		return true
	}
	items := cond.FailIfEventsMatch.Items
	for _, it := range items {
		if len(it.Tags) == 0 {
			return false
		}
	}
	return len(items) > 0
}

// appendTaggedPipelined is append_tagged_fast without the function: two
// statements sent together and run in one implicit transaction (one
// round trip, no BEGIN). The first takes the same advisory locks in the
// same order (before the transaction has an id); the second, whose
// snapshot is taken after them, checks for a retry and the condition and
// appends in one statement, as the function's last three statements do.
// ok reports that it decided the append (committed it, or refused it on
// the condition); otherwise append_tagged decides.
func (b *Backend) appendTaggedPipelined(ctx context.Context, req varve.AppendRequest, cond *varve.AppendCondition, qargs []any) (varve.AppendResult, bool, error) {
	tags, exclusive := lockTags(req, cond)
	var batch pgx.Batch
	batch.Queue(b.sql.taggedLocks, tags, exclusive)
	batch.Queue(b.sql.taggedAppend, qargs...)
	b.requests.Add(1)
	br := b.pool.SendBatch(ctx, &batch)
	_, err := br.Exec()
	var o taggedOutcome
	if err == nil {
		err = br.QueryRow().Scan(o.dest()...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return b.decided(ctx, req, o, err)
}

// lockTags returns the tags whose advisory locks a tagged append takes, as
// append_tagged_fast takes them: the first tag of each item of the
// condition exclusively, each tag of the events shared; a tag in both is
// taken exclusively.
func lockTags(req varve.AppendRequest, cond *varve.AppendCondition) ([]string, []bool) {
	var tags []string
	var exclusive []bool
	at := map[string]int{}
	add := func(t string, x bool) {
		if i, ok := at[t]; ok {
			exclusive[i] = exclusive[i] || x
			return
		}
		at[t] = len(tags)
		tags, exclusive = append(tags, t), append(exclusive, x)
	}
	if cond != nil {
		for _, it := range cond.FailIfEventsMatch.Items {
			add(it.Tags[0], true)
		}
	}
	for i := range req.Events {
		for _, t := range req.Events[i].Tags {
			add(t, false)
		}
	}
	return tags, exclusive
}

// taggedStatements returns the two statements of the pipelined tagged
// append. The locks: those of lockTags ($1, $2 says which are exclusive),
// hashed as append_tagged hashes them, taken in the order of their keys
// (the subquery's order, which OFFSET 0 keeps from being flattened away;
// two tags with one key take it once, exclusively if either asks so). The
// append: the arguments of append_tagged_fast; it returns the append's
// versions and position, or the first match of the condition after the
// given position, or nothing (a first id already in the stream, a wrong
// expected version, a deleted or tombstoned stream, a writer in between).
func taggedStatements(x expander) (locks, appendSQL string) {
	locks = x.fill(`SELECT CASE WHEN l.x THEN pg_advisory_xact_lock(l.h)::text ELSE pg_advisory_xact_lock_shared(l.h)::text END
FROM (
    SELECT hashtextextended('tag:' || k.t, __SEED__) AS h, bool_or(k.x) AS x
      FROM unnest($1::text[], $2::bool[]) AS k(t, x)
     GROUP BY 1 ORDER BY 1 OFFSET 0
) l`)
	appendSQL = x.fill(`WITH dup AS (
    SELECT FROM __SCHEMA__.events e WHERE e.stream = $1::text AND e.id = ($3::uuid[])[1]
), hit AS (
    SELECT h.tx, h.seq FROM jsonb_array_elements($9::jsonb) it
    CROSS JOIN LATERAL (
        SELECT t.tx, t.seq FROM __SCHEMA__.event_tags t
        CROSS JOIN LATERAL (
            SELECT FROM __SCHEMA__.events e
             WHERE e.tx = t.tx AND e.seq = t.seq
               AND (jsonb_array_length(coalesce(it -> 'types', '[]')) = 0
                    OR e.type IN (SELECT jsonb_array_elements_text(it -> 'types')))
               AND e.tags @> ARRAY(SELECT jsonb_array_elements_text(it -> 'tags'))
            OFFSET 0
        ) m
        WHERE t.tag = it -> 'tags' ->> 0 AND (t.tx, t.seq) > ($10::bigint, $11::bigint)
        ORDER BY t.tx, t.seq
        LIMIT 1
    ) h
    WHERE NOT EXISTS (SELECT FROM dup)
    ORDER BY h.tx, h.seq
    LIMIT 1
), cur AS (
    SELECT st.version, st.xmin AS x FROM __SCHEMA__.streams st WHERE st.stream = $1::text
), up AS (
    INSERT INTO __SCHEMA__.streams AS st (stream, version)
    SELECT $1, v + cardinality($3::uuid[]) FROM (SELECT coalesce((SELECT version FROM cur), 0) AS v) c
     WHERE ($2::bigint = -1 OR ($2::bigint = -2 AND v > 0) OR $2::bigint = v)
       AND NOT EXISTS (SELECT FROM dup) AND NOT EXISTS (SELECT FROM hit)
    ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version, updated_at = now()
     WHERE st.xmin = (SELECT x FROM cur) AND NOT st.deleted AND NOT st.tombstoned
    RETURNING st.version
), ins AS (
    INSERT INTO __SCHEMA__.events (tx, stream, version, id, type, data, metadata, category, tags)
    SELECT pg_current_xact_id()::text::bigint, $1, up.version - cardinality($3::uuid[]) + r.ord, r.id, r.typ, r.dat, r.met, $7::text,
           NULLIF(ARRAY(SELECT jsonb_array_elements_text(coalesce($8::jsonb -> (r.ord - 1)::int, '[]'))), '{}')
      FROM up, unnest($3::uuid[], $4::text[], $5::bytea[], $6::bytea[]) WITH ORDINALITY AS r(id, typ, dat, met, ord)
     ORDER BY r.ord
    RETURNING version, tx, seq, tags
), tg AS (
    INSERT INTO __SCHEMA__.event_tags (tag, tx, seq)
    SELECT DISTINCT t, ins.tx, ins.seq FROM ins, unnest(ins.tags) t
)
SELECT a.first, a.last, a.tx, a.seq, hit.tx, hit.seq
FROM (SELECT min(version) AS first, max(version) AS last, max(tx) AS tx, max(seq) AS seq FROM ins) a
LEFT JOIN hit ON true`)
	return locks, appendSQL
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
	want, left := q.Limit, q.MaxBytes
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
		// Candidates have the page's byte budget too: a page of them cut
		// by it is followed by the next.
		cand, cut, err := b.scanAll(rows, nil, q.MaxBytes)
		if err != nil {
			return buf, varve.Position{}, b.fail(ctx, err)
		}
		for i := range cand {
			if q.Query.Match(&cand[i]) {
				buf = append(buf, cand[i])
				if want--; want == 0 || spend(&left, cand[i].Size()) {
					return buf, through, nil
				}
			}
		}
		if len(cand) < size && !cut {
			return buf, through, nil
		}
		after = cand[len(cand)-1].Position
	}
}
