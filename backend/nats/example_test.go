package nats_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats"
)

// Open a store on a NATS server from a URL, as the CLI does.
func Example() {
	ctx := context.Background()
	cfg, err := nats.ParseURL("nats://127.0.0.1:4222?stream=ORDERS&prefix=orders")
	if err != nil {
		log.Fatal(err)
	}
	b, err := nats.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	store, err := varve.New(b, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	res, err := store.Append(ctx, "order-42", varve.NoStream,
		varve.Event{Type: "OrderPlaced", Data: []byte(`{"total":42}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order-42 is at version", res.LastVersion)
}

// Catch up on one category: the backend reads only the subjects of the
// category's streams (<prefix>.e.order.*), and each page's Through moves
// the checkpoint on past events of other categories.
func ExampleBackend_ReadAllFiltered() {
	ctx := context.Background()
	b, err := nats.New(ctx, nats.Config{URL: "nats://127.0.0.1:4222", Stream: "ORDERS", Prefix: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	store, err := varve.New(b, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	fmt.Printf("categories end at %q\n", b.CategorySeparator())
	page, err := store.ReadAllPage(ctx, varve.Start, nil, varve.Filter{Categories: []string{"order"}}, varve.Limit(100))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Events), "order events; next page after", page.Through)
}

// Move money between two accounts atomically, on the condition that the
// account's limits did not change since they were read. The servers from
// 2.12 on have atomic batches; on older ones the store says so.
func ExampleBackend_MultiAppendAvailable() {
	ctx := context.Background()
	b, err := nats.New(ctx, nats.Config{URL: "nats://127.0.0.1:4222", Stream: "BANK", Prefix: "bank"})
	if err != nil {
		log.Fatal(err)
	}
	store, err := varve.New(b, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	if !store.Capabilities().MultiAppend {
		fmt.Println("this server has no atomic batch publish (2.12+)")
		return
	}
	res, err := store.AppendMulti(ctx, []varve.StreamAppend{
		{Stream: "account-1", Expected: varve.Exact(7), Events: []varve.Event{{Type: "Debited", Data: []byte(`{"amount":10}`)}}},
		{Stream: "account-2", Expected: varve.Exact(3), Events: []varve.Event{{Type: "Credited", Data: []byte(`{"amount":10}`)}}},
	}, varve.StreamCheck{Stream: "limits-1", Expected: varve.Exact(2)})
	var conflict *varve.WrongExpectedVersionError
	switch {
	case errors.As(err, &conflict):
		fmt.Println("read", conflict.Stream, "again and decide anew")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("debited at", res[0].Position, "credited at", res[1].Position)
	}
}
