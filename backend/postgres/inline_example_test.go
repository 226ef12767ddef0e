package postgres_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// An inline projection keeps the orders' count in the transaction of each
// append: it never lags, and an append whose hook fails leaves no trace.
func ExampleInlineFunc() {
	ctx := context.Background()
	cfg, err := postgres.ParseURL("postgres://postgres@127.0.0.1:5432/test?sslmode=disable&varve_schema=example_inline")
	if err != nil {
		log.Fatal(err)
	}
	cfg.Inline = func(ctx context.Context, tx pgx.Tx, events []varve.RecordedEvent) error {
		for _, e := range events {
			if e.Type == "OrderPlaced" {
				if _, err := tx.Exec(ctx, `UPDATE example_inline.totals SET total = total + 1 WHERE name = 'orders'`); err != nil {
					return err
				}
			}
		}
		return nil
	}
	b, err := postgres.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.Pool().Exec(ctx, `CREATE TABLE IF NOT EXISTS example_inline.totals (name text PRIMARY KEY, total bigint NOT NULL);
INSERT INTO example_inline.totals VALUES ('orders', 0) ON CONFLICT DO NOTHING`)
	if err != nil {
		log.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(ctx, "order-"+varve.NewEventID().String(), varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{}`))); err != nil {
		log.Fatal(err)
	}
	var total int64
	if err := b.Pool().QueryRow(ctx, `SELECT total FROM example_inline.totals WHERE name = 'orders'`).Scan(&total); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders counted:", total > 0)
}
