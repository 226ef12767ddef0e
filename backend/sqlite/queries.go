package sqlite

import "strings"

// maxInsertRows is the most events one INSERT statement writes: a
// statement's fixed cost (bind, step, halt) is paid once per chunk.
const maxInsertRows = 32

// qInsertEvents[k] inserts k events, for k a power of two up to
// maxInsertRows.
var qInsertEvents = func() map[int]string {
	m := map[int]string{}
	for k := 1; k <= maxInsertRows; k *= 2 {
		q := "INSERT INTO events (position, stream_id, version, event_id, type, data, metadata, recorded_at, category, tags) VALUES "
		q += strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?), ", k)
		m[k] = strings.TrimSuffix(q, ", ")
	}
	return m
}()

// insertRows returns the size of the next chunk of n events to insert.
func insertRows(n int) int {
	k := maxInsertRows
	for k > n {
		k /= 2
	}
	return k
}

// Statements of the writer.
const (
	qNextPosition = `SELECT max(ifnull((SELECT max(position) FROM events), 0), (SELECT last_position FROM log))`

	// The stream and its last event; the plan seeks the last entry of the
	// (stream_id, version) index.
	qStreamRow = `SELECT s.id, s.state, s.version, s.last_position, s.created_at, s.updated_at,
e.version, e.position, e.recorded_at
FROM streams s LEFT JOIN events e ON e.stream_id = s.id
WHERE s.name = ?1 ORDER BY e.version DESC LIMIT 1`

	qInsertStream = `INSERT INTO streams (name, state, version, last_position, created_at, updated_at)
VALUES (?1, ?2, 0, 0, ?3, ?3)`

	// A deleted stream written again starts afresh, creation time included.
	qRecreateStream = `UPDATE streams SET state = 0, version = 0, created_at = ?2, updated_at = ?2 WHERE id = ?1`

	qUpdateStream = `UPDATE streams SET state = ?2, version = ?3, last_position = ?4, updated_at = ?5 WHERE id = ?1`

	qEventVersion = `SELECT version FROM events WHERE stream_id = ?1 AND event_id = ?2`

	qEventIDs = `SELECT event_id, position FROM events WHERE stream_id = ?1 AND version >= ?2 ORDER BY version LIMIT ?3`

	qInsertTag = `INSERT OR IGNORE INTO event_tags (tag, position) VALUES (?1, ?2)`

	qKeepLastPosition = `UPDATE log SET last_position = ?1 WHERE last_position < ?1`

	qTruncate = `DELETE FROM events WHERE stream_id = ?1 AND version < ?2`

	qDeleteEvents = `DELETE FROM events WHERE stream_id = ?1`

	qDeleteSnapshot = `DELETE FROM snapshots WHERE stream = ?1`

	qSaveSnapshot = `INSERT INTO snapshots (stream, version, schema_version, data, taken_at) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (stream) DO UPDATE SET version = excluded.version, schema_version = excluded.schema_version,
data = excluded.data, taken_at = excluded.taken_at`

	qSaveCheckpoint = `INSERT INTO checkpoints (name, commit_id, seq) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET commit_id = excluded.commit_id, seq = excluded.seq`
)

// Statements of the readers. A stream read is one statement, so that the
// stream's state and its events come from one snapshot; the LEFT JOIN gives
// one row of NULL events for a stream without events in the range.
const (
	qReadForward = `SELECT s.state, e.version, e.position, e.event_id, e.type, e.data, e.metadata, e.recorded_at, e.tags
FROM streams s LEFT JOIN events e ON e.stream_id = s.id AND e.version >= ?1
WHERE s.name = ?2 ORDER BY e.version LIMIT ?3`

	qReadBackward = `SELECT s.state, e.version, e.position, e.event_id, e.type, e.data, e.metadata, e.recorded_at, e.tags
FROM streams s LEFT JOIN events e ON e.stream_id = s.id AND e.version <= ?1
WHERE s.name = ?2 ORDER BY e.version DESC LIMIT ?3`

	// CROSS JOIN keeps events as the outer loop, in position order.
	qReadAll = `SELECT e.position, s.name, e.version, e.event_id, e.type, e.data, e.metadata, e.recorded_at, e.tags
FROM events e CROSS JOIN streams s ON s.id = e.stream_id
WHERE e.position > ?1 ORDER BY e.position LIMIT ?2`

	qReadAllBackward = `SELECT e.position, s.name, e.version, e.event_id, e.type, e.data, e.metadata, e.recorded_at, e.tags
FROM events e CROSS JOIN streams s ON s.id = e.stream_id
WHERE e.position < ?1 ORDER BY e.position DESC LIMIT ?2`

	qLastPosition = `SELECT ifnull(max(position), 0) FROM events`

	qLoadSnapshot = `SELECT version, schema_version, data, taken_at FROM snapshots WHERE stream = ?1`

	qLoadCheckpoint = `SELECT commit_id, seq FROM checkpoints WHERE name = ?1`
)
