\set r random(1, 8000)
WITH cur AS (
    SELECT st.version, st.xmin AS x FROM streams st WHERE st.stream = ('order-' || :r)
), up AS (
    INSERT INTO streams AS st (stream, version)
    SELECT ('order-' || :r), v + 1 FROM (SELECT coalesce((SELECT version FROM cur), 0) AS v) c
     WHERE -1::bigint = -1 OR (-1::bigint = -2 AND v > 0) OR -1::bigint = v
    ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version, updated_at = now()
     WHERE st.xmin = (SELECT x FROM cur) AND NOT st.deleted AND NOT st.tombstoned
    RETURNING st.version
), ins AS (
    INSERT INTO events (tx, stream, version, id, type, data, metadata, category)
    SELECT pg_current_xact_id()::text::bigint, ('order-' || :r), up.version, gen_random_uuid(), 'OrderPlaced', convert_to(repeat('x', 100), 'UTF8'), NULL, 'order' FROM up
    RETURNING version, tx, seq
)
SELECT version, tx, seq FROM ins;
