-- Filtered reads of $all: each event keeps its stream's category (the
-- Store's, as of the append), and the log is indexed by category and by
-- event type in position order. Events written before this migration get
-- the category of the default separator "-".
ALTER TABLE events ADD COLUMN category TEXT;

UPDATE events SET category = (
    SELECT CASE WHEN instr(s.name, '-') > 0 THEN substr(s.name, 1, instr(s.name, '-') - 1) ELSE s.name END
      FROM streams s WHERE s.id = events.stream_id);

CREATE INDEX events_category ON events (category, position);
CREATE INDEX events_type ON events (type, position);
