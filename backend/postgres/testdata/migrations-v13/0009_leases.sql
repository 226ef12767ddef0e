-- Leases with fencing tokens: a row per lease; a released lease keeps its
-- token, so that the next holder's is greater. Expiry is the server's
-- clock.
CREATE TABLE __SCHEMA__.leases (
    name    text        PRIMARY KEY,
    holder  text        NOT NULL,
    token   bigint      NOT NULL,
    expires timestamptz NOT NULL
);
