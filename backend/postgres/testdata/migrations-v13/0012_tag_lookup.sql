-- The condition check of append_tagged (migration 8) and
-- append_tagged_fast (migration 10) joined event_tags to events. A plan
-- made while the tables were small, before their first ANALYZE, could take
-- the join as a scan of all events per append (a function caches its
-- plans for the session), and an append grew slower with every event
-- until autovacuum analyzed the tables (0.76 ms growing to 1.67 ms over the
-- first 10,000 events of a new schema). Each candidate's event is now
-- looked up by primary key in a lateral subquery that cannot be flattened
-- (OFFSET 0), as the pipelined tagged append of the Go code does. Nothing
-- else changes.

CREATE OR REPLACE FUNCTION __SCHEMA__.append_tagged(
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
                SELECT t.tx, t.seq FROM __SCHEMA__.event_tags t
                CROSS JOIN LATERAL (
                    SELECT FROM __SCHEMA__.events e
                     WHERE e.tx = t.tx AND e.seq = t.seq
                       AND (jsonb_array_length(coalesce(it -> 'types', '[]')) = 0
                            OR e.type IN (SELECT jsonb_array_elements_text(it -> 'types')))
                       AND e.tags @> ARRAY(SELECT jsonb_array_elements_text(it -> 'tags'))
                    OFFSET 0
                ) m
                WHERE t.tag = it -> 'tags' ->> 0 AND (t.tx, t.seq) > (p_after_tx, p_after_seq)
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

CREATE OR REPLACE FUNCTION __SCHEMA__.append_tagged_fast(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data bytea[], p_meta bytea[], p_category text,
    p_tags jsonb, p_cond jsonb, p_after_tx bigint, p_after_seq bigint,
    OUT o_first bigint, OUT o_last bigint, OUT o_tx bigint, OUT o_seq bigint, OUT o_hit_tx bigint, OUT o_hit_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    n     bigint := cardinality(p_ids);
    lk    bigint;
    lk_ex boolean;
BEGIN
    IF p_cond IS NOT NULL THEN
        IF jsonb_array_length(p_cond) = 0 OR EXISTS (
            SELECT FROM jsonb_array_elements(p_cond) it WHERE jsonb_array_length(coalesce(it -> 'tags', '[]')) = 0) THEN
            PERFORM pg_advisory_xact_lock((__SEED__ >> 32)::int4, (__SEED__ & 2147483647)::int4);
        END IF;
    END IF;
    FOR lk, lk_ex IN
        SELECT l.h, bool_or(l.x) FROM (
            SELECT hashtextextended('tag:' || (it -> 'tags' ->> 0), __SEED__) AS h, true AS x
              FROM jsonb_array_elements(coalesce(p_cond, '[]')) it
             WHERE jsonb_array_length(coalesce(it -> 'tags', '[]')) > 0
            UNION ALL
            SELECT hashtextextended('tag:' || t, __SEED__), false
              FROM jsonb_array_elements(p_tags) ts, jsonb_array_elements_text(ts) t
        ) l GROUP BY l.h ORDER BY l.h
    LOOP
        IF lk_ex THEN
            PERFORM pg_advisory_xact_lock(lk);
        ELSE
            PERFORM pg_advisory_xact_lock_shared(lk);
        END IF;
    END LOOP;

    -- A retry or a duplicate: append_tagged tells them apart.
    IF EXISTS (SELECT FROM __SCHEMA__.events e WHERE e.stream = p_stream AND e.id = p_ids[1]) THEN
        RETURN;
    END IF;

    IF p_cond IS NOT NULL THEN
        SELECT c.tx, c.seq INTO o_hit_tx, o_hit_seq FROM (
            SELECT h.tx, h.seq FROM jsonb_array_elements(p_cond) it
            CROSS JOIN LATERAL (
                SELECT t.tx, t.seq FROM __SCHEMA__.event_tags t
                CROSS JOIN LATERAL (
                    SELECT FROM __SCHEMA__.events e
                     WHERE e.tx = t.tx AND e.seq = t.seq
                       AND (jsonb_array_length(coalesce(it -> 'types', '[]')) = 0
                            OR e.type IN (SELECT jsonb_array_elements_text(it -> 'types')))
                       AND e.tags @> ARRAY(SELECT jsonb_array_elements_text(it -> 'tags'))
                    OFFSET 0
                ) m
                WHERE t.tag = it -> 'tags' ->> 0 AND (t.tx, t.seq) > (p_after_tx, p_after_seq)
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
            RETURN;
        END IF;
    END IF;

    -- The append in one statement: the stream's row only if it is still
    -- the tuple this statement's snapshot read (see the fast append).
    WITH cur AS (
        SELECT st.version, st.xmin AS x FROM __SCHEMA__.streams st WHERE st.stream = p_stream
    ), up AS (
        INSERT INTO __SCHEMA__.streams AS st (stream, version)
        SELECT p_stream, v + n FROM (SELECT coalesce((SELECT version FROM cur), 0) AS v) c
         WHERE p_expected = -1 OR (p_expected = -2 AND v > 0) OR p_expected = v
        ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version, updated_at = now()
         WHERE st.xmin = (SELECT x FROM cur) AND NOT st.deleted AND NOT st.tombstoned
        RETURNING st.version
    ), ins AS (
        INSERT INTO __SCHEMA__.events (tx, stream, version, id, type, data, metadata, category, tags)
        SELECT pg_current_xact_id()::text::bigint, p_stream, up.version - n + r.ord, r.id, r.typ, r.dat, r.met, p_category,
               NULLIF(ARRAY(SELECT jsonb_array_elements_text(coalesce(p_tags -> (r.ord - 1)::int, '[]'))), '{}')
          FROM up, unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS r(id, typ, dat, met, ord)
         ORDER BY r.ord
        RETURNING version, tx, seq, tags
    ), tg AS (
        INSERT INTO __SCHEMA__.event_tags (tag, tx, seq)
        SELECT DISTINCT t, ins.tx, ins.seq FROM ins, unnest(ins.tags) t
    )
    SELECT min(ins.version), max(ins.version), max(ins.tx), max(ins.seq) INTO o_first, o_last, o_tx, o_seq FROM ins;
END
$$;
