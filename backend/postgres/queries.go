package postgres

// queries holds the statements of one schema, built once in New.
type queries struct {
	append, delete, truncate string

	readForward, readBackward string
	readAll, lastPosition     string
	streamInfo                string

	saveSnapshot, loadSnapshot     string
	saveCheckpoint, loadCheckpoint string
}

// xminHorizon is the oldest transaction id that the statement's snapshot
// still sees running: every transaction below it has ended, so the rows of
// $all below it are final.
const xminHorizon = `(pg_snapshot_xmin(pg_current_snapshot())::text::bigint)`

func newQueries(s string) queries {
	const streamCols = `e.tx, e.seq, e.version, e.id, e.type, e.data, e.metadata, e.recorded_at`
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
	return queries{
		append:   `SELECT o_first, o_last, o_tx, o_seq FROM ` + s + `.append($1, $2, $3, $4, $5, $6)`,
		delete:   `SELECT ` + s + `.delete_stream($1, $2, $3)`,
		truncate: `SELECT ` + s + `.truncate_stream($1, $2)`,

		readForward:  readStream(`e.version >= $2`, `ASC`),
		readBackward: readStream(`e.version <= $2`, `DESC`),
		readAll: `SELECT e.tx, e.seq, e.stream, e.version, e.id, e.type, e.data, e.metadata, e.recorded_at
FROM ` + s + `.events e
WHERE (e.tx, e.seq) > ($1, $2) AND e.tx < ` + xminHorizon + `
ORDER BY e.tx, e.seq
LIMIT $3`,
		lastPosition: `SELECT e.tx, e.seq FROM ` + s + `.events e
WHERE e.tx < ` + xminHorizon + `
ORDER BY e.tx DESC, e.seq DESC
LIMIT 1`,
		streamInfo: `SELECT version, last_tx, last_seq, deleted, tombstoned, created_at, updated_at
FROM ` + s + `.streams WHERE stream = $1`,

		saveSnapshot: `INSERT INTO ` + s + `.snapshots (stream, version, schema_version, data, taken_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version,
    schema_version = EXCLUDED.schema_version, data = EXCLUDED.data, taken_at = EXCLUDED.taken_at`,
		loadSnapshot: `SELECT version, schema_version, data, taken_at FROM ` + s + `.snapshots WHERE stream = $1`,
		saveCheckpoint: `INSERT INTO ` + s + `.checkpoints (name, commit_pos, seq_pos) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET commit_pos = EXCLUDED.commit_pos, seq_pos = EXCLUDED.seq_pos, updated_at = now()`,
		loadCheckpoint: `SELECT commit_pos, seq_pos FROM ` + s + `.checkpoints WHERE name = $1`,
	}
}
