-- all_horizon of migration 5 matched a transaction's lock on its id with
-- its writer lock by the virtualtransaction column of pg_locks. That
-- column is not part of the lock table's consistent picture: PostgreSQL
-- fills it from the holder's current local transaction id as it copies
-- each entry, and a committing transaction clears that id (when it leaves
-- the process array) before it releases its locks. A writer that committed
-- just after the reader's snapshot could show its id's lock under
-- "n/123" and its writer lock under "n/0", look like a transaction without
-- the writer lock, and let the horizon pass an id whose rows the snapshot
-- does not see: a reader at the head of $all skipped that transaction for
-- ever (about one skip a second with 16 writers and a reader always at the
-- head). The holder's process id does not change while it holds locks, so
-- the two locks are matched by it. A prepared transaction has no process:
-- it counts as a writer.
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
