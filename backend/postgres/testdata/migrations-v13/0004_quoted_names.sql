-- Migrations 1 and 3 named the event sequence in string literals
-- ('__SCHEMA__.event_seq'), and the loader of that time pasted the quoted
-- schema name into them unescaped: a name with a ' broke out of the
-- literal, so that the column default of events.seq, read as a regclass
-- at every insert, could run code of the name's choosing or take numbers
-- from another schema's sequence, and the append function's currval the
-- same. The loader now escapes a placeholder inside a literal. This
-- migration redefines both for schemas created before: the default
-- resolves the sequence once, here, into its oid, and the append function
-- takes the last seq from the rows it inserts instead of a literal, so no
-- function body names the schema in a string any more.

ALTER TABLE __SCHEMA__.events ALTER COLUMN seq SET DEFAULT nextval('__SCHEMA__.event_seq');

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
