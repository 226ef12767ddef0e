package nats_test

import (
	"context"
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
func ExampleBackend_Layout() {
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

	if categories, sep := b.Layout(); !categories {
		fmt.Println("an old stream: the Store filters $all itself")
	} else {
		fmt.Printf("categories end at %q\n", sep)
	}
	page, err := store.ReadAllPage(ctx, varve.Start, nil, varve.Filter{Categories: []string{"order"}}, varve.Limit(100))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Events), "order events; next page after", page.Through)
}
