-- Deleting or tombstoning a stream drops its snapshot: a re-created stream
-- that grew past the old snapshot's version would otherwise load the state
-- of the stream's previous life.
CREATE FUNCTION __SCHEMA__.drop_snapshot() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM __SCHEMA__.snapshots WHERE stream = NEW.stream;
    RETURN NULL;
END
$$;

CREATE TRIGGER streams_deleted_drop_snapshot
    AFTER UPDATE OF deleted ON __SCHEMA__.streams
    FOR EACH ROW WHEN (NEW.deleted AND NOT OLD.deleted)
    EXECUTE FUNCTION __SCHEMA__.drop_snapshot();

DELETE FROM __SCHEMA__.snapshots sn
 USING __SCHEMA__.streams s
 WHERE s.stream = sn.stream AND s.deleted;
