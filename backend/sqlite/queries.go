package sqlite

// Statements of the writer.
const (
	qNextPosition = `SELECT max(ifnull((SELECT max(position) FROM events), 0), (SELECT last_position FROM log))`

	qStreamRow = `SELECT id, version, last_position, state FROM streams WHERE name = ?1`

	qInsertStream = `INSERT INTO streams (name, version, last_position, state, created_at, updated_at)
VALUES (?1, 0, 0, 0, ?2, ?2)`

	qInsertTombstone = `INSERT INTO streams (name, version, last_position, state, created_at, updated_at)
VALUES (?1, 0, 0, 2, ?2, ?2)`

	qInsertEvent = `INSERT INTO events (position, stream_id, version, event_id, type, data, metadata, recorded_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`

	// A deleted stream written again starts afresh, creation time included.
	qUpdateStreamAppend = `UPDATE streams SET version = ?1, last_position = ?2, updated_at = ?3,
created_at = CASE state WHEN 0 THEN created_at ELSE ?3 END, state = 0
WHERE id = ?4`

	qEventVersion = `SELECT version FROM events WHERE stream_id = ?1 AND event_id = ?2`

	qEventIDs = `SELECT event_id, position FROM events WHERE stream_id = ?1 AND version >= ?2 ORDER BY version LIMIT ?3`

	qKeepLastPosition = `UPDATE log SET last_position = ?1 WHERE last_position < ?1`

	qTruncate = `DELETE FROM events WHERE stream_id = ?1 AND version < ?2`

	qDeleteEvents = `DELETE FROM events WHERE stream_id = ?1`

	qUpdateStreamDelete = `UPDATE streams SET version = 0, state = ?1, updated_at = ?2 WHERE id = ?3`

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
	qReadForward = `SELECT s.state, e.version, e.position, e.event_id, e.type, e.data, e.metadata, e.recorded_at
FROM streams s LEFT JOIN events e ON e.stream_id = s.id AND e.version >= ?1
WHERE s.name = ?2 ORDER BY e.version LIMIT ?3`

	qReadBackward = `SELECT s.state, e.version, e.position, e.event_id, e.type, e.data, e.metadata, e.recorded_at
FROM streams s LEFT JOIN events e ON e.stream_id = s.id AND e.version <= ?1
WHERE s.name = ?2 ORDER BY e.version DESC LIMIT ?3`

	// CROSS JOIN keeps events as the outer loop, in position order.
	qReadAll = `SELECT e.position, s.name, e.version, e.event_id, e.type, e.data, e.metadata, e.recorded_at
FROM events e CROSS JOIN streams s ON s.id = e.stream_id
WHERE e.position > ?1 ORDER BY e.position LIMIT ?2`

	qLastPosition = `SELECT ifnull(max(position), 0) FROM events`

	qStreamInfo = `SELECT version, last_position, state, created_at, updated_at FROM streams WHERE name = ?1`

	qLoadSnapshot = `SELECT version, schema_version, data, taken_at FROM snapshots WHERE stream = ?1`

	qLoadCheckpoint = `SELECT commit_id, seq FROM checkpoints WHERE name = ?1`
)
