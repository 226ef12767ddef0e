package pgcdc_test

import (
	"context"
	"fmt"
	"log"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/cdc/pgcdc"
)

// A consumer reads transactions and acknowledges each one once it is done
// with it; the slot keeps everything after the acknowledged prefix.
func ExampleStart() {
	ctx := context.Background()
	s, err := pgcdc.Start(ctx, pgcdc.Config{
		ConnString: "postgres://postgres@127.0.0.1:5432/shop?sslmode=disable",
		Slot:       "shop_cdc", Publication: "shop_cdc", Tables: []string{"public.orders"},
	})
	if err != nil {
		log.Fatal(err) // pgcdc.ErrWALLevel says what to change on the server
	}
	defer s.Close()
	for {
		tx, err := s.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, c := range tx.Changes {
			fmt.Println(tx.CommitLSN, c.Op, c.Table, c.Key())
		}
		if err := s.Ack(tx); err != nil {
			log.Fatal(err)
		}
	}
}

// Pump appends the captured changes to varve streams, one per row
// ("orders-42"), so subscriptions, projections and delivery work on them.
func ExamplePump() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	s, err := pgcdc.Start(ctx, pgcdc.Config{ConnString: "postgres://postgres@127.0.0.1:5432/shop?sslmode=disable"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := pgcdc.Pump(ctx, s, store, pgcdc.StoreConfig{Layout: pgcdc.PerRow, Namespace: "shop"}); err != nil {
		log.Fatal(err)
	}
}
