-- The varve event store schema: its tables, sequence and indexes as the
-- thirteen migrations before the squash left them (version 13), so a
-- schema they made is at this version already. The functions and triggers
-- are code, not history: they are in code/*.sql and applied at every
-- start. __SCHEMA__ is the quoted schema name and __SEED__ the seed of the
-- schema's advisory lock keys.

-- One row per stream. The columns last_tx and last_seq keep the last
-- position only for a stream that truncation emptied; otherwise it is
-- that of the stream's last event. The default of writer_lock takes the
-- schema's writer lock, a shared transaction-level advisory lock (key: the
-- two halves of the seed, in the two-int4 form, apart from the per-stream
-- keys): the fast append's first write is the stream's row, and a row's
-- values exist before the row is written, so the transaction holds the
-- lock before it has an id (see all_horizon in code/horizon.sql).
CREATE TABLE __SCHEMA__.streams (
    stream      text PRIMARY KEY,
    version     bigint NOT NULL,
    last_tx     bigint NOT NULL DEFAULT 0,
    last_seq    bigint NOT NULL DEFAULT 0,
    deleted     boolean NOT NULL DEFAULT false,
    tombstoned  boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    writer_lock boolean
        DEFAULT (pg_advisory_xact_lock_shared((__SEED__ >> 32)::int4, (__SEED__ & 2147483647)::int4)::text = '')
);

CREATE SEQUENCE __SCHEMA__.event_seq;

-- tx is the writing transaction's pg_current_xact_id(); $all is ordered by
-- (tx, seq) and read only below the horizon of all_horizon, so a reader
-- never passes a transaction that may still commit. category is the
-- stream's category as the Store named it at the append; tags are the
-- keys of Dynamic Consistency Boundaries, also kept in event_tags. The
-- default of seq names the sequence in a literal, read once here into its
-- oid.
CREATE TABLE __SCHEMA__.events (
    tx          bigint NOT NULL,
    seq         bigint NOT NULL DEFAULT nextval('__SCHEMA__.event_seq'),
    stream      text NOT NULL,
    version     bigint NOT NULL,
    id          uuid NOT NULL,
    type        text NOT NULL,
    data        bytea,
    metadata    bytea,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    category    text,
    tags        text[],
    PRIMARY KEY (tx, seq)
);
CREATE UNIQUE INDEX events_stream_version ON __SCHEMA__.events (stream, version);
CREATE UNIQUE INDEX events_stream_id ON __SCHEMA__.events (stream, id);
-- Filtered reads of $all: a range scan of one of these per value, in
-- (tx, seq) order, under the same horizon as $all.
CREATE INDEX events_category ON __SCHEMA__.events (category, tx, seq);
CREATE INDEX events_type ON __SCHEMA__.events (type, tx, seq);

CREATE TABLE __SCHEMA__.snapshots (
    stream         text PRIMARY KEY,
    version        bigint NOT NULL,
    schema_version integer NOT NULL,
    data           bytea,
    taken_at       timestamptz NOT NULL
);

CREATE TABLE __SCHEMA__.checkpoints (
    name       text PRIMARY KEY,
    commit_pos bigint NOT NULL,
    seq_pos    bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The tags' index, (tag, tx, seq), for the reads of a query and the checks
-- of an append's condition; removing an event removes its entries (the
-- trigger events_drop_tags).
CREATE TABLE __SCHEMA__.event_tags (
    tag text   NOT NULL,
    tx  bigint NOT NULL,
    seq bigint NOT NULL,
    PRIMARY KEY (tag, tx, seq)
);

-- Leases with fencing tokens: a row per lease; a released lease keeps its
-- token, so that the next holder's is greater. Expiry is the server's
-- clock.
CREATE TABLE __SCHEMA__.leases (
    name    text        PRIMARY KEY,
    holder  text        NOT NULL,
    token   bigint      NOT NULL,
    expires timestamptz NOT NULL
);
