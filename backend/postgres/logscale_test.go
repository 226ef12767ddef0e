package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

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
	schemas := map[varve.Backend]string{}
	backendtest.RunLogScale(t, backendtest.Factory{
		New: func(t testing.TB) varve.Backend {
			mu.Lock()
			defer mu.Unlock()
			schema := fmt.Sprintf("%s_scale%d", testSchema, len(schemas))
			b := open(t, config(t, schema))
			schemas[b] = schema
			return b
		},
		Settle: func(ctx context.Context, b varve.Backend) error {
			mu.Lock()
			schema, ok := schemas[b]
			mu.Unlock()
			pb, isPG := b.(*postgres.Backend)
			if !ok || !isPG {
				return fmt.Errorf("settle: backend %T of no schema of this test", b)
			}
			for _, table := range []string{"events", "streams"} {
				if _, err := pb.Pool().Exec(ctx, "VACUUM (ANALYZE) "+pgx.Identifier{schema, table}.Sanitize()); err != nil {
					return err
				}
			}
			_, err := pb.Pool().Exec(ctx, "CHECKPOINT")
			return err
		},
	})
}
