package sqlite_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/sqlite"
)

// TestLogScale: appends, $all and a category read as the log grows to 10
// million events (opt-in, VARVE_LOG_SCALE=1). Before it measures at a size
// it checkpoints the write-ahead log into the database file, on a
// connection of its own, as varve bench's storage workloads do: the fill
// leaves a log of millions of pages whose checkpoint would otherwise fall
// into the measurement.
func TestLogScale(t *testing.T) {
	path := tempDB(t)
	backendtest.RunLogScale(t, backendtest.Factory{
		New: func(t testing.TB) varve.Backend { return open(t, sqlite.Config{Path: path}) },
		Settle: func(ctx context.Context, _ varve.Backend) error {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				return err
			}
			defer db.Close()
			_, err = db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
			return err
		},
	})
}
