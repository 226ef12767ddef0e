-- Removing an event removes its tags' entries from event_tags.
CREATE TRIGGER events_drop_tags AFTER DELETE ON events WHEN OLD.tags IS NOT NULL
BEGIN
    DELETE FROM event_tags WHERE tag IN (SELECT value FROM json_each(OLD.tags)) AND position = OLD.position;
END;
