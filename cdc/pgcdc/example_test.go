package pgcdc_test

import (
	"context"
	"fmt"
	"log"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/cdc/pgcdc"
	"github.com/varve-go/varve/delivery"
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

// NewSource hands the captured changes straight to a dispatcher, in order
// per row and many rows at once; the slot's confirmed flush LSN follows the
// dispatcher's checkpoint, one whole transaction at a time. Parked events
// keep their payload in a store of their own, here an embedded SQLite file.
func ExampleNewSource() {
	ctx := context.Background()
	backend, err := sqlite.New(ctx, sqlite.Config{Path: "parked.db"})
	if err != nil {
		log.Fatal(err)
	}
	parkedStore, err := varve.New(backend, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer parkedStore.Close()
	s, err := pgcdc.Start(ctx, pgcdc.Config{ConnString: "postgres://postgres@127.0.0.1:5432/shop?sslmode=disable", Slot: "shop_hooks"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	src, err := pgcdc.NewSource(s, pgcdc.SourceConfig{Namespace: "shop"})
	if err != nil {
		log.Fatal(err)
	}
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		fmt.Println(d.Key, d.Event.Stream, d.Event.Type, string(d.Event.Data))
		return nil
	})
	d, err := delivery.NewFromSource(src, sink, delivery.Config{Concurrency: 25, Parked: delivery.NewParked(parkedStore, src.Name())})
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
