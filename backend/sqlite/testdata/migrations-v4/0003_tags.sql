-- Tags of events, the keys of Dynamic Consistency Boundaries: a JSON array
-- on the event (NULL for none), and an index of (tag, position) for the
-- reads of a query and the checks of an append's condition. Removing an
-- event removes its tags' entries.
ALTER TABLE events ADD COLUMN tags TEXT;

CREATE TABLE event_tags (
    tag      TEXT    NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (tag, position)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER events_drop_tags AFTER DELETE ON events WHEN OLD.tags IS NOT NULL
BEGIN
    DELETE FROM event_tags WHERE tag IN (SELECT value FROM json_each(OLD.tags)) AND position = OLD.position;
END;
