package memory_test

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// The memory backend is the reference: every other backend passes the same
// conformance suite. It keeps nothing beyond the process, so it serves
// tests, caches and the aggregates of a single process.
func Example() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if _, err := store.Append(ctx, "cart-1", varve.NoStream, varve.NewEvent("ItemAdded", []byte(`{"sku":"A-1"}`))); err != nil {
		panic(err)
	}
	info, err := store.StreamInfo(ctx, "cart-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Stream, "at version", info.Version, "durable:", store.Features().Durable)
	// Output: cart-1 at version 1 durable: false
}
