package subscription_test

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/subscription"
)

func Example() {
	ctx := context.Background()
	store, _ := varve.New(memory.New(), varve.Config{})
	defer store.Close()
	store.Append(ctx, "order-1", varve.NoStream, varve.Event{Type: "OrderPlaced"}, varve.Event{Type: "OrderPaid"})
	store.Append(ctx, "user-7", varve.NoStream, varve.Event{Type: "UserJoined"})

	// Orders only, resuming after the saved checkpoint (none yet: from the
	// beginning), then following new events.
	sub, err := subscription.Open(ctx, store, subscription.Config{
		Name:   "order-emails",
		Filter: varve.Filter{StreamPrefixes: []string{"order-"}},
	})
	if err != nil {
		panic(err)
	}
	b, err := sub.Next(ctx)
	if err != nil {
		panic(err)
	}
	for _, e := range b.Events {
		fmt.Println(e.Stream, e.Version, e.Type)
	}
	if err := sub.SaveCheckpoint(ctx, b.Through); err != nil {
		panic(err)
	}
	fmt.Println("checkpoint", b.Through)
	// Output:
	// order-1 1 OrderPlaced
	// order-1 2 OrderPaid
	// checkpoint 3
}
