\set r random(1, 8000)
\set v random(1000000, 2000000000)
INSERT INTO events (tx, stream, version, id, type, data, metadata, category)
VALUES (pg_current_xact_id()::text::bigint, 'order-' || :r, :v, gen_random_uuid(), 'OrderPlaced', convert_to(repeat('x', 100), 'UTF8'), NULL, 'order');
