-- Writers announce themselves, so that $all waits only for them. Every
-- transaction that may write events holds the schema's writer lock, a
-- shared transaction-level advisory lock (key: the two halves of the
-- schema's seed, in the two-int4 form, apart from the per-stream keys),
-- and takes it before it has a transaction id. A reader then takes as its
-- horizon the oldest transaction id running at its snapshot except those of
-- transactions that hold no writer lock (all_horizon below; the package
-- documentation says why that is enough).
--
-- The fast append writes the stream's row before anything else, with an
-- INSERT ... ON CONFLICT, so the default of a column of streams takes the
-- lock for it: a row's values exist before the row is written, and writing
-- it is what gives the statement its id. The same holds for the appends of
-- older versions of varve while processes are upgraded one by one (a
-- default belongs to the schema, not to the code that writes). A statement
-- trigger would do the same at 3-5% of a single append; the default costs
-- about 1% (BenchmarkWriterLock). The append function may write the row
-- with an UPDATE, so it takes the lock itself, first. Delete and truncate
-- write no events and need none. Existing rows keep NULL: adding the column
-- rewrites nothing.

ALTER TABLE __SCHEMA__.streams ADD COLUMN writer_lock boolean;
ALTER TABLE __SCHEMA__.streams ALTER COLUMN writer_lock
    SET DEFAULT (pg_advisory_xact_lock_shared((__SEED__ >> 32)::int4, (__SEED__ & 2147483647)::int4)::text = '');

-- all_horizon is the reader's side: the oldest transaction id that the
-- calling statement's snapshot sees running and that may belong to a
-- writer of this schema. A transaction counts unless the lock table shows
-- it holding its id (the ExclusiveLock every transaction takes on its own
-- id) without the writer lock. Ids that end between the snapshot and the
-- read of the lock table, or that hold no lock on their id yet (the moment
-- between getting an id and locking it), count: they only hold $all back a
-- little longer. With no id below the snapshot's xmax running, the horizon
-- is xmax, and the lock table is not read. On a standby the snapshot lists
-- no ids, so the horizon falls back to xmin. The function is STABLE: it
-- sees the snapshot of the statement that calls it, the one that reads the
-- events, and its plan is cached for the session.
CREATE FUNCTION __SCHEMA__.all_horizon() RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s pg_snapshot := pg_current_snapshot();
    h xid8;
BEGIN
    IF pg_snapshot_xmin(s) = pg_snapshot_xmax(s) THEN
        RETURN pg_snapshot_xmax(s)::text::bigint;
    ELSIF pg_is_in_recovery() THEN
        RETURN pg_snapshot_xmin(s)::text::bigint;
    END IF;
    WITH l AS MATERIALIZED (
        SELECT locktype, database, classid, objid, objsubid, virtualtransaction, transactionid, mode, granted
          FROM pg_catalog.pg_locks WHERE locktype IN ('transactionid', 'advisory')
    )
    SELECT min(x) INTO h FROM pg_snapshot_xip(s) x
     WHERE NOT EXISTS (
        SELECT FROM l t
         WHERE t.locktype = 'transactionid' AND t.transactionid = x::xid
           AND t.mode = 'ExclusiveLock' AND t.granted
           AND NOT EXISTS (
            SELECT FROM l a
             WHERE a.locktype = 'advisory' AND a.virtualtransaction = t.virtualtransaction
               AND a.classid = (__SEED__ >> 32)::oid AND a.objid = (__SEED__ & 2147483647)::oid
               AND a.objsubid = 2
               AND a.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())));
    RETURN coalesce(h, pg_snapshot_xmax(s))::text::bigint;
END
$$;

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
        INSERT INTO __SCHEMA__.events (tx, stream, version, id, type, data, metadata)
        SELECT o_tx, p_stream, cur + r.ord, r.id, r.typ, r.dat, r.met
          FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS r(id, typ, dat, met, ord)
         ORDER BY r.ord
        RETURNING seq
    )
    SELECT max(seq) INTO o_seq FROM ins;
END
$$;
