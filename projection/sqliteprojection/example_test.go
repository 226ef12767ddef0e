package sqliteprojection_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/projection/sqliteprojection"
)

// A read model of events per stream in a table of the store's SQLite file,
// written in the transaction that saves the projection's checkpoint: after
// a crash it is exactly the fold of the events up to the checkpoint.
func Example() {
	ctx := context.Background()
	backend, err := sqlite.New(ctx, sqlite.Config{Path: sqlite.Memory})
	if err != nil {
		log.Fatal(err)
	}
	store, err := varve.New(backend, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	for _, stream := range []string{"order-1", "order-2", "order-1"} {
		if _, err := store.Append(ctx, stream, varve.Any, varve.NewEvent("OrderChanged", nil)); err != nil {
			log.Fatal(err)
		}
	}

	p, err := sqliteprojection.Projection(store, projection.Projection{Name: "per-stream", Version: 1},
		func(ctx context.Context, tx *sql.Tx, b projection.Batch) error {
			if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS per_stream_v1 (stream TEXT PRIMARY KEY, n INTEGER)`); err != nil {
				return err
			}
			for _, e := range b.Events {
				_, err := tx.ExecContext(ctx, `INSERT INTO per_stream_v1 (stream, n) VALUES (?, 1)
ON CONFLICT (stream) DO UPDATE SET n = n + 1`, e.Stream)
				if err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	r, err := projection.NewRunner(store, p, projection.Config{})
	if err != nil {
		log.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	<-r.Live()
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}

	err = backend.ReadTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT stream, n FROM per_stream_v1 ORDER BY stream`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var stream string
			var n int
			if err := rows.Scan(&stream, &n); err != nil {
				return err
			}
			fmt.Println(stream, n)
		}
		return rows.Err()
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// order-1 2
	// order-2 1
}
