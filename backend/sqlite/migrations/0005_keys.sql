-- The wrapped data keys of crypto-shredding (varve.KeyStore), one per
-- subject: id names the key, master the master key that wrapped it. A
-- deletion overwrites the row's bytes in the file (PRAGMA secure_delete).
CREATE TABLE keys (
    subject TEXT    PRIMARY KEY,
    id      BLOB    NOT NULL,
    master  TEXT    NOT NULL,
    wrapped BLOB    NOT NULL,
    created INTEGER NOT NULL  -- Unix nanoseconds
) STRICT, WITHOUT ROWID;
