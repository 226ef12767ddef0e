-- varve event store schema. __SCHEMA__ is the quoted schema name and
-- __SEED__ the seed of the per-stream advisory lock keys of this schema.

CREATE TABLE __SCHEMA__.streams (
    stream     text PRIMARY KEY,
    version    bigint NOT NULL,
    last_tx    bigint NOT NULL DEFAULT 0,
    last_seq   bigint NOT NULL DEFAULT 0,
    deleted    boolean NOT NULL DEFAULT false,
    tombstoned boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE SEQUENCE __SCHEMA__.event_seq;

-- tx is the writing transaction's pg_current_xact_id(); $all is ordered by
-- (tx, seq) and read only below the snapshot's xmin, so a reader never passes
-- a transaction that may still commit.
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
    PRIMARY KEY (tx, seq)
);
CREATE UNIQUE INDEX events_stream_version ON __SCHEMA__.events (stream, version);
CREATE UNIQUE INDEX events_stream_id ON __SCHEMA__.events (stream, id);

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

-- Errors raised by the functions below, mapped to varve's sentinels:
--   VV001 wrong expected version (DETAIL: the actual version)
--   VV002 duplicate event id
--   VV003 stream tombstoned
--   VV004 stream not found

-- append writes the events at the end of the stream in one statement.
-- The per-stream advisory lock is taken before the transaction writes
-- anything, so its transaction id is assigned after the previous append to
-- the stream committed: (tx, seq) order agrees with version order.
CREATE FUNCTION __SCHEMA__.append(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data bytea[], p_meta bytea[],
    OUT o_first bigint, OUT o_last bigint, OUT o_tx bigint, OUT o_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    n       bigint := cardinality(p_ids);
    cur     bigint := 0;
    is_del  boolean;
    is_tomb boolean;
    known   bigint;
    matched bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_stream, __SEED__));
    SELECT s.version, s.deleted, s.tombstoned INTO cur, is_del, is_tomb
      FROM __SCHEMA__.streams s WHERE s.stream = p_stream;
    IF NOT FOUND THEN
        cur := 0;
    ELSIF is_tomb THEN
        RAISE EXCEPTION USING ERRCODE = 'VV003', MESSAGE = 'stream tombstoned';
    END IF;

    SELECT e.version INTO known FROM __SCHEMA__.events e
     WHERE e.stream = p_stream AND e.id = p_ids[1];
    IF FOUND THEN
        SELECT count(*) INTO matched
          FROM unnest(p_ids) WITH ORDINALITY AS r(id, ord)
          JOIN __SCHEMA__.events e
            ON e.stream = p_stream AND e.version = known + r.ord - 1 AND e.id = r.id;
        IF matched <> n THEN
            RAISE EXCEPTION USING ERRCODE = 'VV002', MESSAGE = 'duplicate event id';
        END IF;
        o_first := known;
        o_last := known + n - 1;
        SELECT e.tx, e.seq INTO o_tx, o_seq FROM __SCHEMA__.events e
         WHERE e.stream = p_stream AND e.version = o_last;
        RETURN;
    END IF;

    IF NOT (p_expected = -1 OR (p_expected = -2 AND cur > 0) OR p_expected = cur) THEN
        RAISE EXCEPTION USING ERRCODE = 'VV001', MESSAGE = 'wrong expected version', DETAIL = cur::text;
    END IF;

    o_tx := pg_current_xact_id()::text::bigint;
    INSERT INTO __SCHEMA__.events (tx, stream, version, id, type, data, metadata)
    SELECT o_tx, p_stream, cur + r.ord, r.id, r.typ, r.dat, r.met
      FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS r(id, typ, dat, met, ord)
     ORDER BY r.ord;
    o_seq := currval('__SCHEMA__.event_seq');
    o_first := cur + 1;
    o_last := cur + n;

    IF is_del IS NULL THEN
        INSERT INTO __SCHEMA__.streams (stream, version, last_tx, last_seq)
        VALUES (p_stream, o_last, o_tx, o_seq);
    ELSE
        UPDATE __SCHEMA__.streams s
           SET version = o_last, last_tx = o_tx, last_seq = o_seq, updated_at = now(),
               deleted = false,
               created_at = CASE WHEN s.deleted THEN now() ELSE s.created_at END
         WHERE s.stream = p_stream;
    END IF;
END
$$;

-- delete_stream removes every event of the stream if its version matches;
-- with p_tombstone the stream can never be written again.
CREATE FUNCTION __SCHEMA__.delete_stream(p_stream text, p_expected bigint, p_tombstone boolean)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    cur     bigint;
    is_del  boolean;
    is_tomb boolean;
    exists_ boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_stream, __SEED__));
    SELECT s.version, s.deleted, s.tombstoned INTO cur, is_del, is_tomb
      FROM __SCHEMA__.streams s WHERE s.stream = p_stream;
    exists_ := FOUND;
    IF exists_ AND is_tomb THEN
        RAISE EXCEPTION USING ERRCODE = 'VV003', MESSAGE = 'stream tombstoned';
    END IF;
    IF NOT exists_ OR is_del THEN
        IF NOT p_tombstone THEN
            RAISE EXCEPTION USING ERRCODE = 'VV004', MESSAGE = 'stream not found';
        END IF;
        cur := 0;
    END IF;
    IF NOT (p_expected = -1 OR (p_expected = -2 AND cur > 0) OR p_expected = cur) THEN
        RAISE EXCEPTION USING ERRCODE = 'VV001', MESSAGE = 'wrong expected version', DETAIL = cur::text;
    END IF;
    DELETE FROM __SCHEMA__.events e WHERE e.stream = p_stream;
    IF exists_ THEN
        UPDATE __SCHEMA__.streams s
           SET version = 0, last_tx = 0, last_seq = 0, deleted = true,
               tombstoned = p_tombstone, updated_at = now()
         WHERE s.stream = p_stream;
    ELSE
        INSERT INTO __SCHEMA__.streams (stream, version, deleted, tombstoned)
        VALUES (p_stream, 0, true, true);
    END IF;
END
$$;

-- truncate_stream removes the stream's events with versions below p_before.
CREATE FUNCTION __SCHEMA__.truncate_stream(p_stream text, p_before bigint)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    is_del  boolean;
    is_tomb boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_stream, __SEED__));
    SELECT s.deleted, s.tombstoned INTO is_del, is_tomb
      FROM __SCHEMA__.streams s WHERE s.stream = p_stream;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'VV004', MESSAGE = 'stream not found';
    ELSIF is_tomb THEN
        RAISE EXCEPTION USING ERRCODE = 'VV003', MESSAGE = 'stream tombstoned';
    ELSIF is_del THEN
        RAISE EXCEPTION USING ERRCODE = 'VV004', MESSAGE = 'stream not found';
    END IF;
    DELETE FROM __SCHEMA__.events e WHERE e.stream = p_stream AND e.version < p_before;
END
$$;
