package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrWALLevel is returned when the server does not run with
// wal_level=logical.
var ErrWALLevel = errors.New("pgcdc: logical replication needs wal_level=logical")

// CheckWALLevel returns an error matching [ErrWALLevel] that says what to
// change when the server's wal_level is not logical.
func CheckWALLevel(ctx context.Context, conn *pgx.Conn) error {
	var level string
	if err := conn.QueryRow(ctx, "SELECT current_setting('wal_level')").Scan(&level); err != nil {
		return fmt.Errorf("pgcdc: read wal_level: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("%w: the server runs with wal_level=%s; set wal_level = logical in postgresql.conf "+
			"(or ALTER SYSTEM SET wal_level = logical) and restart the server, and keep max_replication_slots and max_wal_senders above 0",
			ErrWALLevel, level)
	}
	return nil
}

// EnsurePublication creates the publication name for tables (schema-qualified
// or not; none means FOR ALL TABLES) unless it exists. An existing
// publication is reused as it is.
func EnsurePublication(ctx context.Context, conn *pgx.Conn, name string, tables []string) (created bool, err error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("pgcdc: look up publication %q: %w", name, err)
	}
	if exists {
		return false, nil
	}
	what := "ALL TABLES"
	if len(tables) > 0 {
		quoted := make([]string, len(tables))
		for i, t := range tables {
			quoted[i] = pgx.Identifier(strings.SplitN(t, ".", 2)).Sanitize()
		}
		what = "TABLE " + strings.Join(quoted, ", ")
	}
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+pgx.Identifier{name}.Sanitize()+" FOR "+what); err != nil {
		return false, fmt.Errorf("pgcdc: create publication %q: %w", name, err)
	}
	return true, nil
}

// DropPublication drops the publication name if it exists.
func DropPublication(ctx context.Context, conn *pgx.Conn, name string) error {
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("pgcdc: drop publication %q: %w", name, err)
	}
	return nil
}

// EnsureSlot creates the logical replication slot name with the pgoutput
// plugin unless it exists. An existing slot must be a logical pgoutput slot
// of the connection's database.
func EnsureSlot(ctx context.Context, conn *pgx.Conn, name string) (created bool, err error) {
	info, err := Inspect(ctx, conn, name)
	switch {
	case err == nil:
		if info.Plugin != "pgoutput" || info.Database != conn.Config().Database {
			return false, fmt.Errorf("pgcdc: slot %q exists with plugin %q on database %q; want pgoutput on %q", name, info.Plugin, info.Database, conn.Config().Database)
		}
		return false, nil
	case !errors.Is(err, ErrNoSlot):
		return false, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", name); err != nil {
		return false, fmt.Errorf("pgcdc: create slot %q: %w", name, err)
	}
	return true, nil
}

// ErrNoSlot is returned by Inspect for a slot that does not exist.
var ErrNoSlot = errors.New("pgcdc: no such replication slot")

// SlotInfo describes a replication slot.
type SlotInfo struct {
	Name, Plugin, Database string
	// Active is true while a connection streams from the slot.
	Active bool
	// RestartLSN is the oldest WAL the slot keeps; ConfirmedFlushLSN is
	// the end of what its consumer acknowledged.
	RestartLSN, ConfirmedFlushLSN LSN
	// CurrentLSN is the server's current WAL write position.
	CurrentLSN LSN
	// LagBytes is CurrentLSN - ConfirmedFlushLSN: the WAL written since the
	// consumer's last acknowledgement. RetainedBytes is CurrentLSN -
	// RestartLSN: the WAL the server keeps on disk for the slot.
	LagBytes, RetainedBytes int64
	// WALStatus is the server's view of the retained WAL (reserved,
	// extended, unreserved or lost).
	WALStatus string
}

// Inspect describes the slot name, or returns an error matching ErrNoSlot.
func Inspect(ctx context.Context, conn *pgx.Conn, name string) (SlotInfo, error) {
	slots, err := querySlots(ctx, conn, "slot_name = $1", name)
	if err != nil {
		return SlotInfo{}, fmt.Errorf("pgcdc: inspect slot %q: %w", name, err)
	}
	if len(slots) == 0 {
		return SlotInfo{}, fmt.Errorf("%w: %q", ErrNoSlot, name)
	}
	return slots[0], nil
}

// Slots describes the logical replication slots of the connection's
// database, by name.
func Slots(ctx context.Context, conn *pgx.Conn) ([]SlotInfo, error) {
	slots, err := querySlots(ctx, conn, "slot_type = 'logical' AND database = current_database()")
	if err != nil {
		return nil, fmt.Errorf("pgcdc: list slots: %w", err)
	}
	return slots, nil
}

func querySlots(ctx context.Context, conn *pgx.Conn, where string, args ...any) ([]SlotInfo, error) {
	rows, err := conn.Query(ctx, `SELECT slot_name, plugin, database, active, restart_lsn::text, confirmed_flush_lsn::text,
		pg_current_wal_lsn()::text, wal_status
		FROM pg_replication_slots WHERE `+where+` ORDER BY slot_name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SlotInfo
	for rows.Next() {
		var (
			si                       SlotInfo
			plugin, db, walStatus    *string
			restart, confirmed, curr *string
		)
		if err := rows.Scan(&si.Name, &plugin, &db, &si.Active, &restart, &confirmed, &curr, &walStatus); err != nil {
			return nil, err
		}
		deref := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		si.Plugin, si.Database, si.WALStatus = deref(plugin), deref(db), deref(walStatus)
		for _, f := range []struct {
			src *string
			dst *LSN
		}{{restart, &si.RestartLSN}, {confirmed, &si.ConfirmedFlushLSN}, {curr, &si.CurrentLSN}} {
			if f.src == nil {
				continue
			}
			if *f.dst, err = ParseLSN(*f.src); err != nil {
				return nil, err
			}
		}
		if si.ConfirmedFlushLSN > 0 && si.CurrentLSN > si.ConfirmedFlushLSN {
			si.LagBytes = int64(si.CurrentLSN - si.ConfirmedFlushLSN)
		}
		if si.RestartLSN > 0 && si.CurrentLSN > si.RestartLSN {
			si.RetainedBytes = int64(si.CurrentLSN - si.RestartLSN)
		}
		out = append(out, si)
	}
	return out, rows.Err()
}

// DropSlot drops the slot name if it exists. A slot stays in use for a
// moment after its stream closed (the server process lets go of it as it
// exits), so DropSlot retries while the slot is active, until ctx ends:
// close the stream first, or give ctx a deadline.
func DropSlot(ctx context.Context, conn *pgx.Conn, name string) error {
	for {
		_, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", name)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" { // object_in_use
			if err != nil {
				return fmt.Errorf("pgcdc: drop slot %q: %w", name, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcdc: drop slot %q: %w (last: %w)", name, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ParseLSN parses an LSN in PostgreSQL's text form (16/B374D848).
func ParseLSN(s string) (LSN, error) { return pglogrepl.ParseLSN(s) }
