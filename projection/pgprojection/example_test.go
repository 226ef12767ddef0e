package pgprojection_test

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/projection/pgprojection"
)

// A read model of events per stream in a PostgreSQL table, written in the
// transaction that saves the projection's checkpoint: after a crash it is
// exactly the fold of the events up to the checkpoint. Each version writes
// a table of its own, so that a rebuild does not disturb the served one.
func Example() {
	var store *varve.Store // a store over backend/postgres
	ctx := context.Background()
	p, err := pgprojection.Projection(store, projection.Projection{Name: "per-stream", Version: 1},
		func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
			for _, e := range b.Events {
				_, err := tx.Exec(ctx, `INSERT INTO per_stream_v1 AS t (stream, n) VALUES ($1, 1)
ON CONFLICT (stream) DO UPDATE SET n = t.n + 1`, e.Stream)
				if err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return
	}
	r, _ := projection.NewRunner(store, p, projection.Config{})
	_ = r.Run(ctx)
}
