-- The wrapped data keys of crypto-shredding (varve.KeyStore), one per
-- subject: id names the key, master the master key that wrapped it. The
-- subject is in the "C" collation, byte order, so that a listing is a
-- range scan of the primary key. A wrapped key (at most 1 KiB) stays in
-- the table's own pages: never compressed, never moved to its TOAST table.
CREATE TABLE __SCHEMA__.keys (
    subject text        COLLATE "C" PRIMARY KEY,
    id      uuid        NOT NULL,
    master  text        NOT NULL,
    wrapped bytea       NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE __SCHEMA__.keys ALTER COLUMN wrapped SET STORAGE PLAIN;
