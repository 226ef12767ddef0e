-- The append functions. The fast append (queries.go) is one statement and
-- needs none of them; the append function is its slow path, for conflicts,
-- retries, deleted streams and a writer of the stream in between.
--
-- Every append reads the stream's row in a snapshot taken before its
-- transaction has an id and writes only if the row is still that very
-- tuple (same xmin) when it updates it, so a writer that committed in
-- between makes it step back: transaction ids, and with them $all, follow
-- each stream's version order. (Locking the row FOR UPDATE is not enough:
-- a waiter may be given its id before it gets the lock.) The functions
-- also take the stream's advisory lock, so that they do not fail each
-- other's compare-and-set, and, before anything can give the transaction
-- its id, the schema's writer lock (see code/horizon.sql). A failed
-- compare-and-set raises VV005 and the caller runs the function again.
--
-- Errors raised by the functions, mapped to varve's sentinels:
--   VV001 wrong expected version (DETAIL: the actual version)
--   VV002 duplicate event id
--   VV003 stream tombstoned
--   VV004 stream not found
--   VV005 stream changed since read, run again
-- append_multi names the failing stream in HINT.

-- append writes the events at the end of the stream with their category.
CREATE OR REPLACE FUNCTION __SCHEMA__.append(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data bytea[], p_meta bytea[], p_category text,
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
    -- Before anything here can give the transaction its id: see above.
    PERFORM pg_advisory_xact_lock_shared((__SEED__ >> 32)::int4, (__SEED__ & 2147483647)::int4);
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
    WITH ins AS (
        INSERT INTO __SCHEMA__.events (tx, stream, version, id, type, data, metadata, category)
        SELECT o_tx, p_stream, cur + r.ord, r.id, r.typ, r.dat, r.met, p_category
          FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS r(id, typ, dat, met, ord)
         ORDER BY r.ord
        RETURNING seq
    )
    SELECT max(seq) INTO o_seq FROM ins;
END
$$;

-- append without a category gives the events that of the default
-- separator "-" (the trigger events_default_category does the same for
-- rows inserted without one).
CREATE OR REPLACE FUNCTION __SCHEMA__.append(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data bytea[], p_meta bytea[],
    OUT o_first bigint, OUT o_last bigint, OUT o_tx bigint, OUT o_seq bigint)
LANGUAGE sql AS $$
    SELECT a.o_first, a.o_last, a.o_tx, a.o_seq
      FROM __SCHEMA__.append(p_stream, p_expected, p_ids, p_types, p_data, p_meta,
           CASE WHEN strpos(p_stream, '-') > 0 THEN left(p_stream, strpos(p_stream, '-') - 1) ELSE p_stream END) a
$$;

-- append with tags writes each event's tags too, p_tags[i] being those of
-- event i as a JSON array, and their event_tags entries.
CREATE OR REPLACE FUNCTION __SCHEMA__.append(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data bytea[], p_meta bytea[], p_category text, p_tags jsonb,
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
    -- Before anything here can give the transaction its id: see above.
    PERFORM pg_advisory_xact_lock_shared((__SEED__ >> 32)::int4, (__SEED__ & 2147483647)::int4);
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
    WITH ins AS (
        INSERT INTO __SCHEMA__.events (tx, stream, version, id, type, data, metadata, category, tags)
        SELECT o_tx, p_stream, cur + r.ord, r.id, r.typ, r.dat, r.met, p_category,
               NULLIF(ARRAY(SELECT jsonb_array_elements_text(coalesce(p_tags -> (r.ord - 1)::int, '[]'))), '{}')
          FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS r(id, typ, dat, met, ord)
         ORDER BY r.ord
        RETURNING seq
    )
    SELECT max(seq) INTO o_seq FROM ins;
    INSERT INTO __SCHEMA__.event_tags (tag, tx, seq)
    SELECT DISTINCT t, e.tx, e.seq
      FROM __SCHEMA__.events e, jsonb_array_elements_text(coalesce(p_tags -> (e.version - o_first)::int, '[]')) t
     WHERE e.stream = p_stream AND e.version BETWEEN o_first AND o_last;
END
$$;
