package lab

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/internal/workload"
)

// BenchBytes is what a storage workload measured of the store's size on
// disk: its Size after settling, before and after the workload's events,
// and the growth per event.
type BenchBytes struct {
	Before   int64   `json:"before"`
	After    int64   `json:"after"`
	PerEvent float64 `json:"per_event"`
	// Settle is what made the size steady before each Size: "VACUUM
	// (ANALYZE)" on PostgreSQL, "PRAGMA wal_checkpoint(TRUNCATE)" on
	// SQLite, empty where the backend has nothing to settle.
	Settle string `json:"settle"`
}

// sizer is a backend that tells its size on disk.
type sizer interface {
	Size(ctx context.Context) (int64, error)
}

// runBytes runs a storage workload as Run does, and sizes the store around
// it: one untimed round of ops first (so that the streams exist), then the
// store settled and sized, the measured run, and the store settled and
// sized again. bytes is nil for a store without a size.
func runBytes(ctx context.Context, s *varve.Store, rawURL string, w workload.Workload, p workload.Params, units int, d time.Duration, rate float64, live *Live) (Result, *BenchBytes, error) {
	sz, ok := varve.As[sizer](s.Backend())
	if !ok {
		res, err := Run(ctx, s, w, p, units, d, rate, live)
		return res, nil, err
	}
	p.Events = units
	prep, err := w.Setup(ctx, s, p)
	if err != nil {
		return Result{}, nil, fmt.Errorf("set up %s: %w", w.Name, err)
	}
	for worker := range w.Workers {
		op := prep.NewOp(worker)
		for range workload.StorageStreams {
			if _, err := op(ctx); err != nil {
				return Result{}, nil, fmt.Errorf("%s: first round: %w", w.Name, err)
			}
		}
	}
	b := &BenchBytes{}
	if b.Before, b.Settle, err = settledSize(ctx, s, sz, rawURL); err != nil {
		return Result{}, nil, fmt.Errorf("%s: size before: %w", w.Name, err)
	}
	res, err := Measure(ctx, w.Workers, prep.NewOp, Limits{Ops: prep.Ops(units), Duration: d, Rate: rate}, live)
	if err != nil {
		return res, nil, fmt.Errorf("%s: %w", w.Name, err)
	}
	if b.After, _, err = settledSize(ctx, s, sz, rawURL); err != nil {
		return res, nil, fmt.Errorf("%s: size after: %w", w.Name, err)
	}
	if res.Events > 0 {
		b.PerEvent = float64(b.After-b.Before) / float64(res.Events)
	}
	return res, b, nil
}

// settledSize settles what the backend allows and returns its Size, and
// how it settled. PostgreSQL: VACUUM (ANALYZE) of the schema's tables,
// which sets their visibility and free space maps as autovacuum would in
// time. SQLite: PRAGMA wal_checkpoint(TRUNCATE) on a connection of its own,
// which copies the write-ahead log into the file and empties it, so that
// Size is the file's pages. NATS and memory: nothing.
func settledSize(ctx context.Context, s *varve.Store, sz sizer, rawURL string) (int64, string, error) {
	var how string
	if pg, ok := varve.As[*postgres.Backend](s.Backend()); ok {
		how = "VACUUM (ANALYZE)"
		if err := vacuumSchema(ctx, pg); err != nil {
			return 0, how, err
		}
	}
	if _, ok := varve.As[*sqlite.Backend](s.Backend()); ok {
		if path, err := sqlitePath(rawURL); err == nil && !strings.Contains(path, ":memory:") {
			how = "PRAGMA wal_checkpoint(TRUNCATE)"
			if err := checkpointFile(ctx, path); err != nil {
				return 0, how, err
			}
		}
	}
	n, err := sz.Size(ctx)
	if err != nil {
		return 0, how, fmt.Errorf("size: %w", err)
	}
	return n, how, nil
}

func vacuumSchema(ctx context.Context, pg *postgres.Backend) error {
	rows, err := pg.Pool().Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname`, pg.Schema())
	if err != nil {
		return fmt.Errorf("list the tables of schema %s: %w", pg.Schema(), err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list the tables of schema %s: %w", pg.Schema(), err)
	}
	if len(tables) == 0 {
		return nil
	}
	if _, err := pg.Pool().Exec(ctx, "VACUUM (ANALYZE) "+strings.Join(tables, ", ")); err != nil {
		return fmt.Errorf("vacuum schema %s: %w", pg.Schema(), err)
	}
	return nil
}

// checkpointFile copies the write-ahead log of the database file at path
// into it and truncates the log, retrying while a reader holds it.
func checkpointFile(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	for {
		var busy, log, done int64
		if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &done); err != nil {
			return fmt.Errorf("checkpoint %s: %w", path, err)
		}
		if busy == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("checkpoint %s: busy: %w", path, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
