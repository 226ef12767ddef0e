-- all_horizon is the $all reader's horizon: the oldest transaction id that
-- the calling statement's snapshot sees running and that may belong to a
-- writer of this schema. Every transaction that may write events holds
-- the schema's writer lock (shared; the default of streams.writer_lock, or
-- the append functions' first step) from before it has an id until it
-- ends. A transaction counts unless the lock table shows its process
-- holding its id (the ExclusiveLock every transaction takes on its own id)
-- without the writer lock; the two locks are matched by the holder's
-- process id, which does not change while it holds locks (the
-- virtualtransaction column is not part of the lock table's consistent
-- picture: a committing transaction clears it before it releases its
-- locks). A prepared transaction has no process: it counts as a writer.
-- Ids that end between the snapshot and the read of the lock table, or
-- that hold no lock on their id yet, count: they only hold $all back a
-- little longer. With no id below the snapshot's xmax running, the
-- horizon is xmax, and the lock table is not read. On a standby the
-- snapshot lists no ids, so the horizon falls back to xmin. The function
-- is STABLE: it sees the snapshot of the statement that calls it, the one
-- that reads the events. docs/backends/postgres.md has the proof.
CREATE OR REPLACE FUNCTION __SCHEMA__.all_horizon() RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s pg_snapshot := pg_current_snapshot();
    h xid8;
BEGIN
    IF pg_snapshot_xmin(s) = pg_snapshot_xmax(s) THEN
        RETURN pg_snapshot_xmax(s)::text::bigint;
    ELSIF pg_is_in_recovery() THEN
        RETURN pg_snapshot_xmin(s)::text::bigint;
    END IF;
    WITH l AS MATERIALIZED (
        SELECT locktype, database, classid, objid, objsubid, pid, transactionid, mode, granted
          FROM pg_catalog.pg_locks WHERE locktype IN ('transactionid', 'advisory')
    )
    SELECT min(x) INTO h FROM pg_snapshot_xip(s) x
     WHERE NOT EXISTS (
        SELECT FROM l t
         WHERE t.locktype = 'transactionid' AND t.transactionid = x::xid
           AND t.mode = 'ExclusiveLock' AND t.granted AND t.pid IS NOT NULL
           AND NOT EXISTS (
            SELECT FROM l a
             WHERE a.locktype = 'advisory' AND a.pid = t.pid
               AND a.classid = (__SEED__ >> 32)::oid AND a.objid = (__SEED__ & 2147483647)::oid
               AND a.objsubid = 2
               AND a.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())));
    RETURN coalesce(h, pg_snapshot_xmax(s))::text::bigint;
END
$$;
