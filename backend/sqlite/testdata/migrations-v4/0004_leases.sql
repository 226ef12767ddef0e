-- Leases with fencing tokens: a row per lease; a released lease keeps its
-- token, so that the next holder's is greater.
CREATE TABLE leases (
    name    TEXT    PRIMARY KEY,
    holder  TEXT    NOT NULL,
    token   INTEGER NOT NULL,
    expires INTEGER NOT NULL  -- Unix nanoseconds
) STRICT;
