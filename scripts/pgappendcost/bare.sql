INSERT INTO bare (id, type, data) VALUES (gen_random_uuid(), 'OrderPlaced', convert_to(repeat('x', 100), 'UTF8'));
