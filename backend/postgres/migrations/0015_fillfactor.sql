-- The three indexes in (tx, seq) order grow at their right edge: appends
-- only add keys above every key there, and nothing updates or removes an
-- entry but a truncation or deletion. A page split at the right edge
-- leaves the left page as full as the index's fillfactor says; at the
-- b-tree's default, 90, a tenth of every page stayed empty for updates
-- that never come (3-5 bytes an event, docs/backends/postgres.md). The
-- setting applies to the splits from now on; pages split before keep
-- their free space until a REINDEX.
ALTER INDEX __SCHEMA__.events_pkey SET (fillfactor = 100);
ALTER INDEX __SCHEMA__.events_type SET (fillfactor = 100);
ALTER INDEX __SCHEMA__.events_category SET (fillfactor = 100);
