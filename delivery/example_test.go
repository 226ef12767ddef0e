package delivery_test

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/subscription"
)

func Example() {
	ctx := context.Background()
	store, _ := varve.New(memory.New(), varve.Config{})
	defer store.Close()
	res, _ := store.Append(ctx, "order-1", varve.NoStream,
		varve.Event{Type: "OrderPlaced"}, varve.Event{Type: "OrderPaid"})

	sub, err := subscription.Open(ctx, store, subscription.Config{Name: "emails"})
	if err != nil {
		panic(err)
	}
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		fmt.Println(d.Key, d.Event.Stream, d.Event.Version, d.Event.Type)
		return nil
	})
	d, err := delivery.New(sub, sink, delivery.Config{Concurrency: 8, Ordering: delivery.PerStream})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- d.Run(runCtx) }()

	if err := d.WaitFor(ctx, res.Position); err != nil {
		panic(err)
	}
	stop()
	if err := <-done; err != nil {
		panic(err)
	}
	fmt.Println("checkpoint", d.Stats().Saved)
	// Output:
	// emails:1 order-1 1 OrderPlaced
	// emails:2 order-1 2 OrderPaid
	// checkpoint 2
}
