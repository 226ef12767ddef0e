-- Filtered reads of $all: each event keeps its stream's category (the
-- Store's, as of the append), and the log is indexed by category and by
-- event type in (tx, seq) order, so that a filtered page is a range scan of
-- an index under the same horizon as $all. Events written before get the
-- category of the default separator "-". Building the indexes blocks
-- writes to the schema while the migration runs.

ALTER TABLE __SCHEMA__.events ADD COLUMN category text;

UPDATE __SCHEMA__.events
   SET category = CASE WHEN strpos(stream, '-') > 0 THEN left(stream, strpos(stream, '-') - 1) ELSE stream END;

CREATE INDEX events_category ON __SCHEMA__.events (category, tx, seq);
CREATE INDEX events_type ON __SCHEMA__.events (type, tx, seq);

-- The append function of migration 5, writing the category.
CREATE FUNCTION __SCHEMA__.append(
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

-- Processes of older versions keep writing while they are upgraded: their
-- appends name no category, and get the one of the default separator, from
-- the six-argument append function and, for their one-statement appends,
-- from a trigger that does nothing when the category is given.
CREATE FUNCTION __SCHEMA__.default_category() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.category := CASE WHEN strpos(NEW.stream, '-') > 0 THEN left(NEW.stream, strpos(NEW.stream, '-') - 1) ELSE NEW.stream END;
    RETURN NEW;
END
$$;

CREATE TRIGGER events_default_category BEFORE INSERT ON __SCHEMA__.events
    FOR EACH ROW WHEN (NEW.category IS NULL) EXECUTE FUNCTION __SCHEMA__.default_category();

CREATE OR REPLACE FUNCTION __SCHEMA__.append(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data bytea[], p_meta bytea[],
    OUT o_first bigint, OUT o_last bigint, OUT o_tx bigint, OUT o_seq bigint)
LANGUAGE sql AS $$
    SELECT a.o_first, a.o_last, a.o_tx, a.o_seq
      FROM __SCHEMA__.append(p_stream, p_expected, p_ids, p_types, p_data, p_meta,
           CASE WHEN strpos(p_stream, '-') > 0 THEN left(p_stream, strpos(p_stream, '-') - 1) ELSE p_stream END) a
$$;
