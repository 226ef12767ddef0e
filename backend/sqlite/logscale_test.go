package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/sqlite"
)

// TestLogScale: appends, $all and a category read as the log grows to 10
// million events (opt-in, VARVE_LOG_SCALE=1), each store in a file of its
// own. Before it measures at a size it checkpoints the write-ahead log into
// the database file, on a connection of its own, as varve bench's storage
// workloads do.
func TestLogScale(t *testing.T) {
	var mu sync.Mutex
	paths := map[varve.Backend]string{}
	backendtest.RunLogScale(t, backendtest.Factory{
		New: func(t testing.TB) varve.Backend {
			path := tempDB(t)
			b := open(t, sqlite.Config{Path: path})
			mu.Lock()
			paths[b] = path
			mu.Unlock()
			return b
		},
		Settle: func(ctx context.Context, b varve.Backend) error {
			mu.Lock()
			path, ok := paths[b]
			mu.Unlock()
			if !ok {
				return fmt.Errorf("settle: backend %T of no file of this test", b)
			}
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
