package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/postgres"
)

// TestLogScale: appends, $all and a category read as the log grows to 10
// million events (opt-in, VARVE_LOG_SCALE=1), each store in a schema of its
// own (TestMain drops them). Before it measures at a size it vacuums and
// analyzes the store's events and streams and takes a checkpoint: the fill
// writes millions of rows in minutes, and the autovacuum and checkpoints it
// sets off would otherwise run during the measurement.
func TestLogScale(t *testing.T) {
	var mu sync.Mutex
	n := 0
	backendtest.RunLogScale(t, backendtest.Factory{
		New: func(t testing.TB) varve.Backend {
			mu.Lock()
			defer mu.Unlock()
			n++
			return open(t, config(t, fmt.Sprintf("%s_scale%d", testSchema, n-1)))
		},
		Settle: func(ctx context.Context, b varve.Backend) error {
			pb, ok := b.(*postgres.Backend)
			if !ok {
				return fmt.Errorf("settle: backend %T", b)
			}
			for _, table := range []string{"events", "streams"} {
				if _, err := pb.Pool().Exec(ctx, "VACUUM (ANALYZE) "+pb.Schema()+"."+table); err != nil {
					return err
				}
			}
			_, err := pb.Pool().Exec(ctx, "CHECKPOINT")
			return err
		},
	})
}
