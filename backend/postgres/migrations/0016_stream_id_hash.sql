-- events_stream_id keeps an event id unique within its stream, and finds
-- an event of a stream by its id (the retry of an append). Keyed on
-- (stream, id), it held the stream's name in every entry: the widest part
-- of the key, 120 of the 600 bytes a 100-byte event cost with names of 36
-- bytes (docs/backends/postgres.md, "Bytes per event"). Keyed on the id
-- and a 64-bit hash of the stream, an entry is 24 bytes of key whatever
-- the name. Every pair the old index refused, this one refuses: equal
-- streams have equal hashes. It also refuses an id written to two
-- streams whose names have the same 64-bit hash, a chance of about 2^-64
-- for a pair of streams that share an id at all. A lookup of (stream, id)
-- is a range scan of the id, and the stream is checked on the row. The
-- name stays, so a violation is reported as before (errors.go).
CREATE UNIQUE INDEX events_id_stream ON __SCHEMA__.events (id, hashtextextended(stream, 0));
DROP INDEX __SCHEMA__.events_stream_id;
ALTER INDEX __SCHEMA__.events_id_stream RENAME TO events_stream_id;
