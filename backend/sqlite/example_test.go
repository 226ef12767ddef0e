package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

func Example() {
	dir, err := os.MkdirTemp("", "varve-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	cfg, err := sqlite.ParseURL("sqlite://" + filepath.Join(dir, "events.db") + "?synchronous=full")
	if err != nil {
		log.Fatal(err)
	}
	backend, err := sqlite.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	store, err := varve.New(backend, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // closes the backend

	res, err := store.Append(ctx, "order-42", varve.NoStream,
		varve.Event{Type: "OrderPlaced", Data: []byte(`{"total":12.5}`)},
		varve.Event{Type: "OrderPaid", Data: []byte(`{"by":"card"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("versions", res.FirstVersion, "to", res.LastVersion)
	for e, err := range store.ReadStream(ctx, "order-42") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Version, e.Type, string(e.Data))
	}
	// Output:
	// versions 1 to 2
	// 1 OrderPlaced {"total":12.5}
	// 2 OrderPaid {"by":"card"}
}

// An application table written in the writer's transaction together with a
// checkpoint: both commit or neither does.
func ExampleBackend_WriteTx() {
	ctx := context.Background()
	backend, err := sqlite.New(ctx, sqlite.Config{Path: sqlite.Memory})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	err = backend.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE totals (name TEXT PRIMARY KEY, total INTEGER)`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO totals VALUES ('orders', 3)`); err != nil {
			return err
		}
		_, err := sqlite.AdvanceCheckpoint(ctx, tx, "totals", varve.Position{Seq: 3})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	var total int
	err = backend.ReadTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT total FROM totals WHERE name = 'orders'`).Scan(&total)
	})
	if err != nil {
		log.Fatal(err)
	}
	pos, _, err := backend.LoadCheckpoint(ctx, "totals")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(total, pos)
	// Output: 3 3
}

// An inline projection keeps the orders' count in the transaction of each
// append: it never lags, and an append whose hook fails leaves no trace.
func ExampleInlineFunc() {
	ctx := context.Background()
	backend, err := sqlite.New(ctx, sqlite.Config{Path: sqlite.Memory,
		Inline: func(ctx context.Context, tx *sql.Tx, events []varve.RecordedEvent) error {
			for _, e := range events {
				if e.Type == "OrderPlaced" {
					if _, err := tx.ExecContext(ctx, `UPDATE totals SET total = total + 1 WHERE name = 'orders'`); err != nil {
						return err
					}
				}
			}
			return nil
		}})
	if err != nil {
		log.Fatal(err)
	}
	err = backend.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE totals (name TEXT PRIMARY KEY, total INTEGER); INSERT INTO totals VALUES ('orders', 0)`)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	store, err := varve.New(backend, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	for _, id := range []string{"order-1", "order-2"} {
		if _, err := store.Append(ctx, id, varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{}`))); err != nil {
			log.Fatal(err)
		}
	}
	var total int
	err = backend.ReadTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT total FROM totals WHERE name = 'orders'`).Scan(&total)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", total)
	// Output: orders: 2
}
