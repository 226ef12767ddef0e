package postgres

import "strings"

// queries holds the statements of one schema, built once in New.
type queries struct {
	appendOne, appendMany    string // the fast path, one statement
	append, delete, truncate string

	readForward, readBackward string
	readAll, lastPosition     string
	readAllBackward           string
	streamInfo                string

	// Filtered reads of $all: by the categories' index, by the types'
	// index, and a scan for stream prefixes alone.
	readByCategory, readByType, readByPrefix string

	// readByTags reads the candidates of a query.
	readByTags string

	// horizonLast gives the $all horizon and the last event below it, from
	// one evaluation of the horizon: query reads take both from it, and
	// pass the horizon to their page statements (a filtered page reads
	// both in its own statement, see withHorizon). Two
	// statements that each computed the horizon could see it go back (a
	// transaction without events that ends between the second's snapshot
	// and its look at the lock table counts for it), and a page read below
	// the lower one would miss events before the first one's last position.
	horizonLast string
	// The $all statements read below the greater of the horizon and a
	// floor, a horizon proven before (Backend.floor): see floor.go.
	// readAllBelow is readAll below a given horizon ($4).
	readAllBelow string

	// taggedLocks and taggedAppend are the pipelined tagged append (see
	// appendTaggedPipelined); they need the seed.
	taggedLocks, taggedAppend string

	// numberPositions and positionOfNumber are position numbers (see
	// numberQueries).
	numberPositions, positionOfNumber string

	saveSnapshot, loadSnapshot     string
	saveCheckpoint, loadCheckpoint string

	putKey, getKey, deleteKey, rewrapKey, listKeys string
}

// writersHorizon is the $all horizon: see all_horizon in code/horizon.sql.
func writersHorizon(schema string) string { return `(SELECT ` + schema + `.all_horizon())` }

func newQueries(s, horizon string) queries {
	streamCols := `e.tx, e.seq, e.version, e.id, e.type, e.data, e.metadata, e.recorded_at, e.tags`
	readStream := func(cond, order string) string {
		return `SELECT s.deleted, s.tombstoned, ` + streamCols + `
FROM ` + s + `.streams s
LEFT JOIN LATERAL (
    SELECT * FROM ` + s + `.events e
    WHERE e.stream = s.stream AND ` + cond + `
    ORDER BY e.version ` + order + `
    LIMIT $3
) e ON true
WHERE s.stream = $1`
	}
	// The fast append reads the stream's row from its snapshot, upserts
	// the row only if it is still that tuple (ON CONFLICT DO UPDATE locks
	// and sees the latest tuple; a changed xmin means another writer
	// committed since the snapshot), and only then inserts the events. It
	// returns no row when it declines (a wrong expected version, a deleted
	// or tombstoned stream, a concurrent writer); the caller then calls the
	// append function, which tells these cases apart (code/append.sql).
	fastAppend := func(n, rows, last string) string {
		return `WITH cur AS (
    SELECT st.version, st.xmin AS x FROM ` + s + `.streams st WHERE st.stream = $1::text
), up AS (
    INSERT INTO ` + s + `.streams AS st (stream, version)
    SELECT $1, v + ` + n + ` FROM (SELECT coalesce((SELECT version FROM cur), 0) AS v) c
     WHERE $2::bigint = -1 OR ($2::bigint = -2 AND v > 0) OR $2::bigint = v
    ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version, updated_at = now()
     WHERE st.xmin = (SELECT x FROM cur) AND NOT st.deleted AND NOT st.tombstoned
    RETURNING st.version
), ins AS (
    INSERT INTO ` + s + `.events ` + rows + `
    RETURNING version, tx, seq
)
SELECT version, tx, seq FROM ins` + last
	}
	allCols := `e.tx, e.seq, e.stream, e.version, e.id, e.type, e.data, e.metadata, e.recorded_at, e.tags`
	// A filtered page: for each indexed value ($4), a range scan of its
	// index after ($1, $2) and below the horizon, each bounded by the limit
	// ($3), merged by position. The planner cannot know how selective a
	// value from unnest is, and given "category = v.val" it would rather
	// filter the primary key's scan of $all, which also reads in (tx, seq)
	// order. So the range is written on the index's own columns, from
	// (value, $1, $2) to (value, horizon, 0) (seq starts at 1), which pins
	// the value without an equality, and the order (value, tx, seq) is one
	// only that index gives. $5 and $6 are the types and stream prefixes
	// checked on each row (NULL for none), behind a CASE for the reason
	// byPrefix gives: bare, they made the range look rare, and the plan
	// read the whole range after the position and sorted it for each page.
	byIndex := func(col string) string {
		return `SELECT ` + allCols + `
FROM unnest($4::text[]) AS v(val)
CROSS JOIN LATERAL (
    SELECT * FROM ` + s + `.events e
    WHERE (e.` + col + `, e.tx, e.seq) > (v.val, $1, $2) AND (e.` + col + `, e.tx, e.seq) < (v.val, __H__, 0)
      AND CASE WHEN ($5::text[] IS NULL OR e.type = ANY($5::text[])) AND ($6::text[] IS NULL OR e.stream ^@ ANY($6::text[])) THEN true END
    ORDER BY e.` + col + `, e.tx, e.seq
    LIMIT $3
) e
ORDER BY e.tx, e.seq
LIMIT $3`
	}
	// A page of stream prefixes walks $all in order from the position and
	// stops at the page's end. The prefixes are behind a CASE, which the
	// planner cannot estimate: given the bare condition, before a table's
	// first ANALYZE it took any prefix for a rare one, read every event
	// after the position and sorted them for each page (TestFilterPlans).
	byPrefix := `SELECT ` + allCols + `
FROM ` + s + `.events e
WHERE (e.tx, e.seq) > ($1, $2) AND e.tx < __H__ AND CASE WHEN e.stream ^@ ANY($4::text[]) THEN true END
ORDER BY e.tx, e.seq
LIMIT $3`
	// withHorizon makes a filtered page one statement: it evaluates the
	// $all horizon once (at least the floor, floorExpr), and returns
	// it and the last event below it (the page's through) in the first
	// three columns of every row, then the page's events read below it
	// (__H__ in page), from the same snapshot; an empty page is one row
	// whose event columns are NULL.
	withHorizon := func(page, floor string) string {
		return `WITH hz AS MATERIALIZED (SELECT greatest(` + horizon + `, ` + floor + `) AS h)
SELECT hz.h, coalesce(l.tx, 0), coalesce(l.seq, 0), p.*
FROM hz
LEFT JOIN LATERAL (
    SELECT e.tx, e.seq FROM ` + s + `.events e
    WHERE e.tx < hz.h
    ORDER BY e.tx DESC, e.seq DESC
    LIMIT 1
) l ON true
LEFT JOIN LATERAL (
` + strings.ReplaceAll(page, "__H__", "hz.h") + `
) p ON true
ORDER BY p.tx, p.seq`
	}
	// $4 the first tag of each item with tags, $5 the types of the others;
	// the page's candidates, without repeats, each looked up by primary key
	// in a subquery that cannot be flattened (a join planned before the
	// tables' first ANALYZE could scan all events per read).
	byTags := `SELECT ` + allCols + `
FROM (
    SELECT DISTINCT ON (c.tx, c.seq) c.tx, c.seq FROM (
        SELECT k.tx, k.seq FROM unnest($4::text[]) AS v(val)
        CROSS JOIN LATERAL (
            SELECT t.tx, t.seq FROM ` + s + `.event_tags t
            WHERE (t.tag, t.tx, t.seq) > (v.val, $1, $2) AND (t.tag, t.tx, t.seq) < (v.val, $6::bigint, 0)
            ORDER BY t.tag, t.tx, t.seq
            LIMIT $3
        ) k
        UNION ALL
        SELECT k.tx, k.seq FROM unnest($5::text[]) AS v(val)
        CROSS JOIN LATERAL (
            SELECT e.tx, e.seq FROM ` + s + `.events e
            WHERE (e.type, e.tx, e.seq) > (v.val, $1, $2) AND (e.type, e.tx, e.seq) < (v.val, $6::bigint, 0)
            ORDER BY e.type, e.tx, e.seq
            LIMIT $3
        ) k
    ) c
    ORDER BY c.tx, c.seq
    LIMIT $3
) c
CROSS JOIN LATERAL (SELECT * FROM ` + s + `.events e WHERE e.tx = c.tx AND e.seq = c.seq OFFSET 0) e
ORDER BY e.tx, e.seq`
	numbers, position := numberQueries(s)
	return queries{
		numberPositions:  numbers,
		positionOfNumber: position,
		horizonLast: `WITH hz AS MATERIALIZED (SELECT greatest(` + horizon + `, ` + floorExpr("$1", "$2") + `) AS h)
SELECT hz.h, coalesce(l.tx, 0), coalesce(l.seq, 0) FROM hz
LEFT JOIN LATERAL (
    SELECT e.tx, e.seq FROM ` + s + `.events e
    WHERE e.tx < hz.h
    ORDER BY e.tx DESC, e.seq DESC
    LIMIT 1
) l ON true`,
		readAllBelow: `SELECT ` + allCols + `
FROM ` + s + `.events e
WHERE (e.tx, e.seq) > ($1, $2) AND e.tx < $4::bigint
ORDER BY e.tx, e.seq
LIMIT $3`,
		readByTags:     byTags,
		readByCategory: withHorizon(byIndex("category"), floorExpr("$7", "$8")),
		readByType:     withHorizon(byIndex("type"), floorExpr("$7", "$8")),
		readByPrefix:   withHorizon(byPrefix, floorExpr("$5", "$6")),
		appendOne: fastAppend("1", `(tx, stream, version, id, type, data, metadata, category)
    SELECT pg_current_xact_id()::text::bigint, $1, up.version, $3::uuid, $4::text, $5::bytea, $6::bytea, $7::text FROM up`, ``),
		appendMany: fastAppend("cardinality($3::uuid[])", `(tx, stream, version, id, type, data, metadata, category)
    SELECT pg_current_xact_id()::text::bigint, $1, up.version - cardinality($3::uuid[]) + r.ord, r.id, r.typ, r.dat, r.met, $7::text
      FROM up, unnest($3::uuid[], $4::text[], $5::bytea[], $6::bytea[]) WITH ORDINALITY AS r(id, typ, dat, met, ord)
     ORDER BY r.ord`, ` ORDER BY version DESC LIMIT 1`),
		append:   `SELECT o_first, o_last, o_tx, o_seq FROM ` + s + `.append($1, $2, $3, $4, $5, $6, $7)`,
		delete:   `SELECT ` + s + `.delete_stream($1, $2, $3)`,
		truncate: `SELECT ` + s + `.truncate_stream($1, $2)`,

		readForward:  readStream(`e.version >= $2`, `ASC`),
		readBackward: readStream(`e.version <= $2`, `DESC`),
		readAll: `SELECT ` + allCols + `
FROM ` + s + `.events e
WHERE (e.tx, e.seq) > ($1, $2) AND e.tx < greatest(` + horizon + `, ` + floorExpr("$4", "$5") + `)
ORDER BY e.tx, e.seq
LIMIT $3`,
		readAllBackward: `SELECT ` + allCols + `
FROM ` + s + `.events e
WHERE (e.tx, e.seq) < ($1, $2) AND e.tx < greatest(` + horizon + `, ` + floorExpr("$4", "$5") + `)
ORDER BY e.tx DESC, e.seq DESC
LIMIT $3`,
		lastPosition: `SELECT e.tx, e.seq FROM ` + s + `.events e
WHERE e.tx < greatest(` + horizon + `, ` + floorExpr("$1", "$2") + `)
ORDER BY e.tx DESC, e.seq DESC
LIMIT 1`,
		streamInfo: `SELECT s.version, coalesce(e.tx, s.last_tx), coalesce(e.seq, s.last_seq),
    s.deleted, s.tombstoned, s.created_at, s.updated_at
FROM ` + s + `.streams s
LEFT JOIN LATERAL (
    SELECT e.tx, e.seq FROM ` + s + `.events e
    WHERE e.stream = s.stream ORDER BY e.version DESC LIMIT 1
) e ON true
WHERE s.stream = $1`,

		saveSnapshot: `INSERT INTO ` + s + `.snapshots (stream, version, schema_version, data, taken_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version,
    schema_version = EXCLUDED.schema_version, data = EXCLUDED.data, taken_at = EXCLUDED.taken_at`,
		loadSnapshot: `SELECT version, schema_version, data, taken_at FROM ` + s + `.snapshots WHERE stream = $1`,
		saveCheckpoint: `INSERT INTO ` + s + `.checkpoints (name, commit_pos, seq_pos) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET commit_pos = EXCLUDED.commit_pos, seq_pos = EXCLUDED.seq_pos, updated_at = now()`,
		loadCheckpoint: `SELECT commit_pos, seq_pos FROM ` + s + `.checkpoints WHERE name = $1`,

		// The key inserted, or the one that was there. The second part
		// reads the statement's snapshot: a key committed by another
		// transaction after it began makes the insert do nothing and is
		// not seen, and the statement returns no row (see PutKey).
		putKey: `WITH ins AS (
    INSERT INTO ` + s + `.keys (subject, id, master, wrapped) VALUES ($1, $2, $3, $4)
    ON CONFLICT (subject) DO NOTHING
    RETURNING id, master, wrapped, created
)
SELECT id, master, wrapped, created FROM ins
UNION ALL
SELECT id, master, wrapped, created FROM ` + s + `.keys WHERE subject = $1 AND NOT EXISTS (SELECT FROM ins)`,
		getKey:    `SELECT id, master, wrapped, created FROM ` + s + `.keys WHERE subject = $1`,
		deleteKey: `DELETE FROM ` + s + `.keys WHERE subject = $1 AND id = $2`,
		rewrapKey: `UPDATE ` + s + `.keys SET master = $3, wrapped = $4 WHERE subject = $1 AND id = $2 AND master = $5`,
		listKeys:  `SELECT subject, id, master, wrapped, created FROM ` + s + `.keys WHERE subject > $1 ORDER BY subject LIMIT $2`,
	}
}
