-- Tags of events, the keys of Dynamic Consistency Boundaries: an array on
-- the event, and event_tags, an index of (tag, tx, seq) for the reads of a
-- query and the checks of an append's condition. Removing an event
-- removes its entries.
ALTER TABLE __SCHEMA__.events ADD COLUMN tags text[];

CREATE TABLE __SCHEMA__.event_tags (
    tag text   NOT NULL,
    tx  bigint NOT NULL,
    seq bigint NOT NULL,
    PRIMARY KEY (tag, tx, seq)
);

CREATE FUNCTION __SCHEMA__.drop_tags() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM __SCHEMA__.event_tags t WHERE t.tag = ANY(OLD.tags) AND t.tx = OLD.tx AND t.seq = OLD.seq;
    RETURN NULL;
END
$$;

CREATE TRIGGER events_drop_tags AFTER DELETE ON __SCHEMA__.events
    FOR EACH ROW WHEN (OLD.tags IS NOT NULL) EXECUTE FUNCTION __SCHEMA__.drop_tags();

-- The append function of migration 6 that also writes each event's tags,
-- p_tags[i] being those of event i as a JSON array.
CREATE FUNCTION __SCHEMA__.append(
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

-- append_tagged appends events with tags (p_tags, as above), under an
-- optional condition: no event that matches p_cond (a JSON array of items
-- {"types": [...], "tags": [...]}; an empty array matches every event)
-- after (p_after_tx, p_after_seq). When one does, it returns its position
-- in o_hit_tx, o_hit_seq and writes nothing.
--
-- Locks, taken before the transaction has an id, key by key in key order:
-- the writer of a tagged event holds a shared lock on each of its tags'
-- keys; a condition item with tags takes the exclusive lock of its first
-- tag's key, which every writer of a matching event holds shared; an item
-- without tags, or an empty condition, takes the schema's writer lock
-- exclusively, which every writer holds shared. The condition is then read
-- from a snapshot that follows every commit of a matching event before the
-- locks, and none can commit until this transaction ends. Appends whose
-- tags and conditions do not meet do not wait for each other.
CREATE FUNCTION __SCHEMA__.append_tagged(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data bytea[], p_meta bytea[], p_category text,
    p_tags jsonb, p_cond jsonb, p_after_tx bigint, p_after_seq bigint,
    OUT o_first bigint, OUT o_last bigint, OUT o_tx bigint, OUT o_seq bigint, OUT o_hit_tx bigint, OUT o_hit_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    k       bigint;
    matched bigint;
    n       bigint := cardinality(p_ids);
    h       bigint;
    x       boolean;
BEGIN
    IF p_cond IS NOT NULL THEN
        IF jsonb_array_length(p_cond) = 0 OR EXISTS (
            SELECT FROM jsonb_array_elements(p_cond) it WHERE jsonb_array_length(coalesce(it -> 'tags', '[]')) = 0) THEN
            PERFORM pg_advisory_xact_lock((__SEED__ >> 32)::int4, (__SEED__ & 2147483647)::int4);
        END IF;
    END IF;
    FOR h, x IN
        SELECT l.h, bool_or(l.x) FROM (
            SELECT hashtextextended('tag:' || (it -> 'tags' ->> 0), __SEED__) AS h, true AS x
              FROM jsonb_array_elements(coalesce(p_cond, '[]')) it
             WHERE jsonb_array_length(coalesce(it -> 'tags', '[]')) > 0
            UNION ALL
            SELECT hashtextextended('tag:' || t, __SEED__), false
              FROM jsonb_array_elements(p_tags) ts, jsonb_array_elements_text(ts) t
        ) l GROUP BY l.h ORDER BY l.h
    LOOP
        IF x THEN
            PERFORM pg_advisory_xact_lock(h);
        ELSE
            PERFORM pg_advisory_xact_lock_shared(h);
        END IF;
    END LOOP;

    -- The first matching event after the position: for each item, a range
    -- scan of its first tag's entries or of its types' index, each checked
    -- against the whole item; for an empty condition, of $all.
    IF p_cond IS NOT NULL THEN
        SELECT c.tx, c.seq INTO o_hit_tx, o_hit_seq FROM (
            SELECT h.tx, h.seq FROM jsonb_array_elements(p_cond) it
            CROSS JOIN LATERAL (
                SELECT e.tx, e.seq FROM __SCHEMA__.event_tags t
                JOIN __SCHEMA__.events e ON e.tx = t.tx AND e.seq = t.seq
                WHERE t.tag = it -> 'tags' ->> 0 AND (t.tx, t.seq) > (p_after_tx, p_after_seq)
                  AND (jsonb_array_length(coalesce(it -> 'types', '[]')) = 0
                       OR e.type IN (SELECT jsonb_array_elements_text(it -> 'types')))
                  AND e.tags @> ARRAY(SELECT jsonb_array_elements_text(it -> 'tags'))
                ORDER BY t.tx, t.seq
                LIMIT 1
            ) h
            WHERE jsonb_array_length(coalesce(it -> 'tags', '[]')) > 0
            UNION ALL
            SELECT h.tx, h.seq FROM jsonb_array_elements(p_cond) it, jsonb_array_elements_text(it -> 'types') typ
            CROSS JOIN LATERAL (
                SELECT e.tx, e.seq FROM __SCHEMA__.events e
                WHERE e.type = typ AND (e.tx, e.seq) > (p_after_tx, p_after_seq)
                ORDER BY e.type, e.tx, e.seq
                LIMIT 1
            ) h
            WHERE jsonb_array_length(coalesce(it -> 'tags', '[]')) = 0
            UNION ALL
            (SELECT e.tx, e.seq FROM __SCHEMA__.events e
              WHERE jsonb_array_length(p_cond) = 0 AND (e.tx, e.seq) > (p_after_tx, p_after_seq)
              ORDER BY e.tx, e.seq
              LIMIT 1)
        ) c
        ORDER BY c.tx, c.seq
        LIMIT 1;
        IF FOUND THEN
            -- A retry of a committed append is answered whatever the
            -- condition says (its own events may be what matches).
            SELECT e.version INTO k FROM __SCHEMA__.events e WHERE e.stream = p_stream AND e.id = p_ids[1];
            IF FOUND THEN
                SELECT count(*) INTO matched
                  FROM unnest(p_ids) WITH ORDINALITY AS r(id, ord)
                  JOIN __SCHEMA__.events e ON e.stream = p_stream AND e.version = k + r.ord - 1 AND e.id = r.id;
                IF matched = n THEN
                    SELECT k, k + n - 1, e.tx, e.seq INTO o_first, o_last, o_tx, o_seq
                      FROM __SCHEMA__.events e WHERE e.stream = p_stream AND e.version = k + n - 1;
                    o_hit_tx := NULL;
                    o_hit_seq := NULL;
                END IF;
            END IF;
            RETURN;
        END IF;
    END IF;

    SELECT a.o_first, a.o_last, a.o_tx, a.o_seq INTO o_first, o_last, o_tx, o_seq
      FROM __SCHEMA__.append(p_stream, p_expected, p_ids, p_types, p_data, p_meta, p_category, p_tags) a;
END
$$;
