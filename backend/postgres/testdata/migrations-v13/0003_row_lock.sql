-- Appends no longer hold a lock across the whole statement. The fast
-- append (queries.go) is one statement: it reads the stream's row from its
-- snapshot and upserts the row only if it is still that very tuple (same
-- xmin), then inserts the events; the append function below, now the slow
-- path for conflicts, retries and deleted streams, does the same compare-
-- and-set on the row before it writes an event. Either way a writer that
-- succeeds saw the previous writer's commit in a snapshot taken before its
-- transaction got an id, so ids, and $all, follow version order. (Locking
-- the row FOR UPDATE is not enough: a waiter may be given its id before it
-- gets the lock, and $all then has versions out of order.) The functions
-- still take the advisory lock, so that they do not fail each other's
-- compare-and-set; delete and truncate also lock the row, which waits for
-- a fast append in flight. A failed compare-and-set raises VV005 and the
-- caller runs the function again. last_tx and last_seq are kept only by
-- truncate now: stream info reads the last position from the last event
-- and falls back to them when a truncation removed every event.

CREATE OR REPLACE FUNCTION __SCHEMA__.append(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data bytea[], p_meta bytea[],
    OUT o_first bigint, OUT o_last bigint, OUT o_tx bigint, OUT o_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    n       bigint := cardinality(p_ids);
    cur     bigint := 0;
    is_del  boolean;
    is_tomb boolean;
    row_x   xid;
    known   bigint;
    matched bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_stream, __SEED__));
    SELECT s.version, s.deleted, s.tombstoned, s.xmin INTO cur, is_del, is_tomb, row_x
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

    o_first := cur + 1;
    o_last := cur + n;
    IF row_x IS NULL THEN
        -- A concurrent creator makes this a unique violation: run again.
        INSERT INTO __SCHEMA__.streams (stream, version) VALUES (p_stream, o_last);
    ELSE
        UPDATE __SCHEMA__.streams s
           SET version = o_last, updated_at = now(), deleted = false,
               created_at = CASE WHEN s.deleted THEN now() ELSE s.created_at END
         WHERE s.stream = p_stream AND s.xmin = row_x;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'VV005', MESSAGE = 'stream changed since read, run again';
        END IF;
    END IF;

    o_tx := pg_current_xact_id()::text::bigint;
    INSERT INTO __SCHEMA__.events (tx, stream, version, id, type, data, metadata)
    SELECT o_tx, p_stream, cur + r.ord, r.id, r.typ, r.dat, r.met
      FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS r(id, typ, dat, met, ord)
     ORDER BY r.ord;
    o_seq := currval('__SCHEMA__.event_seq');
END
$$;

CREATE OR REPLACE FUNCTION __SCHEMA__.delete_stream(p_stream text, p_expected bigint, p_tombstone boolean)
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
      FROM __SCHEMA__.streams s WHERE s.stream = p_stream FOR UPDATE;
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
        -- A writer creating the stream meanwhile makes this a unique
        -- violation; the caller retries and finds the row.
        INSERT INTO __SCHEMA__.streams (stream, version, deleted, tombstoned)
        VALUES (p_stream, 0, true, true);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION __SCHEMA__.truncate_stream(p_stream text, p_before bigint)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    cur     bigint;
    is_del  boolean;
    is_tomb boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_stream, __SEED__));
    SELECT s.version, s.deleted, s.tombstoned INTO cur, is_del, is_tomb
      FROM __SCHEMA__.streams s WHERE s.stream = p_stream FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'VV004', MESSAGE = 'stream not found';
    ELSIF is_tomb THEN
        RAISE EXCEPTION USING ERRCODE = 'VV003', MESSAGE = 'stream tombstoned';
    ELSIF is_del OR cur = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'VV004', MESSAGE = 'stream not found';
    END IF;
    IF p_before > cur THEN
        -- Every event goes: keep the last position for stream info.
        UPDATE __SCHEMA__.streams s SET last_tx = e.tx, last_seq = e.seq
          FROM (SELECT tx, seq FROM __SCHEMA__.events
                 WHERE stream = p_stream ORDER BY version DESC LIMIT 1) e
         WHERE s.stream = p_stream;
    END IF;
    DELETE FROM __SCHEMA__.events e WHERE e.stream = p_stream AND e.version < p_before;
END
$$;
