-- append_multi appends to several streams atomically, each part at its own
-- expected version, and checks the versions of streams it does not write.
-- The events of all parts come in flat arrays, p_counts[i] of them for
-- p_streams[i]. Errors are those of append, with the failing stream in
-- HINT. It takes the writer lock and every stream's lock (written or
-- checked, in the order of the lock keys, so that two of them cannot
-- deadlock) before anything gives the transaction its id, reads every
-- stream, and only then writes, each row with the compare-and-set of the
-- append function: a writer that committed to one of the streams after
-- this function read it makes the write fail with VV005 (run again), so
-- the transaction id, taken at the first write, follows every commit it
-- read and $all stays in version order on every stream.
CREATE OR REPLACE FUNCTION __SCHEMA__.append_multi(
    p_streams text[], p_expected bigint[], p_counts int[], p_categories text[],
    p_ids uuid[], p_types text[], p_data bytea[], p_meta bytea[],
    p_checks text[], p_check_expected bigint[])
RETURNS TABLE (o_first bigint, o_last bigint, o_tx bigint, o_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    parts   int := cardinality(p_streams);
    curs    bigint[] := '{}';
    rows_x  xid[] := '{}';
    known   bigint[] := '{}';
    offs    int[] := '{}';
    off     int := 0;
    retries int := 0;
    cur     bigint;
    is_del  boolean;
    is_tomb boolean;
    row_x   xid;
    k       bigint;
    matched bigint;
    n       int;
BEGIN
    PERFORM pg_advisory_xact_lock_shared((__SEED__ >> 32)::int4, (__SEED__ & 2147483647)::int4);
    PERFORM pg_advisory_xact_lock(h)
       FROM (SELECT DISTINCT hashtextextended(s, __SEED__) AS h
               FROM unnest(p_streams || coalesce(p_checks, '{}')) AS s) l
      ORDER BY h;

    FOR i IN 1..parts LOOP
        n := p_counts[i];
        offs := offs || off;
        SELECT st.version, st.deleted, st.tombstoned, st.xmin INTO cur, is_del, is_tomb, row_x
          FROM __SCHEMA__.streams st WHERE st.stream = p_streams[i];
        IF NOT FOUND THEN
            cur := 0;
            row_x := NULL;
        ELSIF is_tomb THEN
            RAISE EXCEPTION USING ERRCODE = 'VV003', MESSAGE = 'stream tombstoned', HINT = p_streams[i];
        END IF;
        SELECT e.version INTO k FROM __SCHEMA__.events e
         WHERE e.stream = p_streams[i] AND e.id = p_ids[off + 1];
        IF FOUND THEN
            SELECT count(*) INTO matched
              FROM generate_series(1, n) AS r(ord)
              JOIN __SCHEMA__.events e
                ON e.stream = p_streams[i] AND e.version = k + r.ord - 1 AND e.id = p_ids[off + r.ord];
            IF matched <> n THEN
                RAISE EXCEPTION USING ERRCODE = 'VV002', MESSAGE = 'duplicate event id', HINT = p_streams[i];
            END IF;
            retries := retries + 1;
        ELSIF NOT (p_expected[i] = -1 OR (p_expected[i] = -2 AND cur > 0) OR p_expected[i] = cur) THEN
            RAISE EXCEPTION USING ERRCODE = 'VV001', MESSAGE = 'wrong expected version', DETAIL = cur::text, HINT = p_streams[i];
        END IF;
        curs := curs || cur;
        rows_x := rows_x || row_x;
        known := known || k;
        off := off + n;
    END LOOP;

    FOR i IN 1..coalesce(cardinality(p_checks), 0) LOOP
        SELECT st.version, st.tombstoned INTO cur, is_tomb
          FROM __SCHEMA__.streams st WHERE st.stream = p_checks[i];
        IF NOT FOUND THEN
            cur := 0;
        ELSIF is_tomb THEN
            RAISE EXCEPTION USING ERRCODE = 'VV003', MESSAGE = 'stream tombstoned', HINT = p_checks[i];
        END IF;
        IF NOT ((p_check_expected[i] = -2 AND cur > 0) OR p_check_expected[i] = cur) THEN
            RAISE EXCEPTION USING ERRCODE = 'VV001', MESSAGE = 'wrong expected version', DETAIL = cur::text, HINT = p_checks[i];
        END IF;
    END LOOP;

    IF retries = parts THEN
        FOR i IN 1..parts LOOP
            o_first := known[i];
            o_last := known[i] + p_counts[i] - 1;
            SELECT e.tx, e.seq INTO o_tx, o_seq FROM __SCHEMA__.events e
             WHERE e.stream = p_streams[i] AND e.version = o_last;
            RETURN NEXT;
        END LOOP;
        RETURN;
    ELSIF retries > 0 THEN
        FOR i IN 1..parts LOOP
            IF known[i] IS NOT NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'VV002', MESSAGE = 'duplicate event id', HINT = p_streams[i];
            END IF;
        END LOOP;
    END IF;

    FOR i IN 1..parts LOOP
        n := p_counts[i];
        o_first := curs[i] + 1;
        o_last := curs[i] + n;
        IF rows_x[i] IS NULL THEN
            -- A concurrent creator makes this a unique violation: run again.
            INSERT INTO __SCHEMA__.streams (stream, version) VALUES (p_streams[i], o_last);
        ELSE
            UPDATE __SCHEMA__.streams s
               SET version = o_last, updated_at = now(), deleted = false,
                   created_at = CASE WHEN s.deleted THEN now() ELSE s.created_at END
             WHERE s.stream = p_streams[i] AND s.xmin = rows_x[i];
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'VV005', MESSAGE = 'stream changed since read, run again';
            END IF;
        END IF;
        o_tx := pg_current_xact_id()::text::bigint;
        WITH ins AS (
            INSERT INTO __SCHEMA__.events (tx, stream, version, id, type, data, metadata, category)
            SELECT o_tx, p_streams[i], curs[i] + r.ord, p_ids[offs[i] + r.ord], p_types[offs[i] + r.ord],
                   p_data[offs[i] + r.ord], p_meta[offs[i] + r.ord], p_categories[i]
              FROM generate_series(1, n) AS r(ord)
             ORDER BY r.ord
            RETURNING seq
        )
        SELECT max(ins.seq) INTO o_seq FROM ins;
        RETURN NEXT;
    END LOOP;
END
$$;
