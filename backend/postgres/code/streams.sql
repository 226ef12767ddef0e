-- delete_stream removes every event of the stream if its version matches;
-- with p_tombstone the stream can never be written again. It locks the
-- stream's row, which waits for a fast append in flight.
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

-- truncate_stream removes the stream's events with versions below
-- p_before. When every event goes, the stream's row keeps the last
-- position for stream info.
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
