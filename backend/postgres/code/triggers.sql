-- Triggers and their functions. A function here is replaced at every
-- start like the others; a trigger is created when its table lacks it (a
-- trigger that exists is left alone: replacing it would lock its table
-- against writers at every start, so a change to a trigger itself, its
-- timing or its condition, needs a migration).

-- Deleting or tombstoning a stream drops its snapshot: a re-created stream
-- that grew past the old snapshot's version would otherwise load the state
-- of the stream's previous life.
CREATE OR REPLACE FUNCTION __SCHEMA__.drop_snapshot() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM __SCHEMA__.snapshots WHERE stream = NEW.stream;
    RETURN NULL;
END
$$;

-- An event inserted without a category (by hand, or by a process of an
-- older varve) gets the one of the default separator "-".
CREATE OR REPLACE FUNCTION __SCHEMA__.default_category() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.category := CASE WHEN strpos(NEW.stream, '-') > 0 THEN left(NEW.stream, strpos(NEW.stream, '-') - 1) ELSE NEW.stream END;
    RETURN NEW;
END
$$;

-- Removing an event removes its event_tags entries.
CREATE OR REPLACE FUNCTION __SCHEMA__.drop_tags() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM __SCHEMA__.event_tags t WHERE t.tag = ANY(OLD.tags) AND t.tx = OLD.tx AND t.seq = OLD.seq;
    RETURN NULL;
END
$$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger
                    WHERE tgrelid = '__SCHEMA__.streams'::regclass AND tgname = 'streams_deleted_drop_snapshot') THEN
        CREATE TRIGGER streams_deleted_drop_snapshot
            AFTER UPDATE OF deleted ON __SCHEMA__.streams
            FOR EACH ROW WHEN (NEW.deleted AND NOT OLD.deleted)
            EXECUTE FUNCTION __SCHEMA__.drop_snapshot();
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger
                    WHERE tgrelid = '__SCHEMA__.events'::regclass AND tgname = 'events_default_category') THEN
        CREATE TRIGGER events_default_category BEFORE INSERT ON __SCHEMA__.events
            FOR EACH ROW WHEN (NEW.category IS NULL) EXECUTE FUNCTION __SCHEMA__.default_category();
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger
                    WHERE tgrelid = '__SCHEMA__.events'::regclass AND tgname = 'events_drop_tags') THEN
        CREATE TRIGGER events_drop_tags AFTER DELETE ON __SCHEMA__.events
            FOR EACH ROW WHEN (OLD.tags IS NOT NULL) EXECUTE FUNCTION __SCHEMA__.drop_tags();
    END IF;
END
$$;
