-- The varve event store schema as the four migrations before the squash
-- left it (version 4), so a file they made is at this version already. The
-- trigger is code, not history: it is in code/ and kept as written there
-- whenever the file is opened. SQLite keeps each CREATE statement's text,
-- comments included, in sqlite_schema, and ADD COLUMN wrote the columns
-- category and tags into the text of events where they stand below: the
-- text here is the history's, letter for letter.
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
-- reader's snapshot always holds a prefix of the log. category is the
-- stream's category as the Store named it at the append; tags, a JSON array
-- (NULL for none), are the keys of Dynamic Consistency Boundaries, also
-- kept in event_tags.
CREATE TABLE events (
    position    INTEGER PRIMARY KEY,
    stream_id   INTEGER NOT NULL REFERENCES streams (id),
    version     INTEGER NOT NULL,
    event_id    BLOB    NOT NULL,
    type        TEXT    NOT NULL,
    data        BLOB,
    metadata    BLOB,
    recorded_at INTEGER NOT NULL, category TEXT, tags TEXT,
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

-- Filtered reads of $all: the log indexed by category and by event type
-- in position order.
CREATE INDEX events_category ON events (category, position);
CREATE INDEX events_type ON events (type, position);

-- The tags' index, (tag, position), for the reads of a query and the
-- checks of an append's condition; removing an event removes its entries
-- (code/events_drop_tags.sql).
CREATE TABLE event_tags (
    tag      TEXT    NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (tag, position)
) STRICT, WITHOUT ROWID;

-- Leases with fencing tokens: a row per lease; a released lease keeps its
-- token, so that the next holder's is greater.
CREATE TABLE leases (
    name    TEXT    PRIMARY KEY,
    holder  TEXT    NOT NULL,
    token   INTEGER NOT NULL,
    expires INTEGER NOT NULL  -- Unix nanoseconds
) STRICT;
