-- The varve event store schema, version 1.
PRAGMA application_id = 1986097782; -- 'varv'

-- A stream is never removed: deleting it keeps its row (state 1), so that
-- its id stays stable; a tombstone is state 2. An append writes only to
-- events: the stream's version, last position and update time are those of
-- its last event, and the columns below hold them only for a stream without
-- events (created by a tombstone, deleted, or truncated to nothing), as of
-- its last state change or truncation.
CREATE TABLE streams (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    state         INTEGER NOT NULL DEFAULT 0, -- 0 live, 1 deleted, 2 tombstoned
    version       INTEGER NOT NULL,
    last_position INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,           -- Unix nanoseconds
    updated_at    INTEGER NOT NULL
) STRICT;

-- position is the rowid. The single writer assigns it in commit order, so a
-- reader's snapshot always holds a prefix of the log.
CREATE TABLE events (
    position    INTEGER PRIMARY KEY,
    stream_id   INTEGER NOT NULL REFERENCES streams (id),
    version     INTEGER NOT NULL,
    event_id    BLOB    NOT NULL,
    type        TEXT    NOT NULL,
    data        BLOB,
    metadata    BLOB,
    recorded_at INTEGER NOT NULL,
    UNIQUE (stream_id, version),
    UNIQUE (stream_id, event_id)
) STRICT;

-- The highest position ever assigned, kept up to date before events are
-- removed, so that positions are never reused.
CREATE TABLE log (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    last_position INTEGER NOT NULL
) STRICT;
INSERT INTO log (id, last_position) VALUES (1, 0);

CREATE TABLE snapshots (
    stream         TEXT    PRIMARY KEY,
    version        INTEGER NOT NULL,
    schema_version INTEGER NOT NULL,
    data           BLOB,
    taken_at       INTEGER              -- Unix nanoseconds, NULL for a zero time
) STRICT;

CREATE TABLE checkpoints (
    name      TEXT    PRIMARY KEY,
    commit_id INTEGER NOT NULL,
    seq       INTEGER NOT NULL
) STRICT;
