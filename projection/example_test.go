package projection_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/projection"
)

// A read model of orders placed per customer, kept up to date by a runner.
func Example() {
	ctx := context.Background()
	store, _ := varve.New(memory.New(), varve.Config{})
	defer store.Close()
	for _, c := range []string{"order-1", "order-2", "order-1"} {
		_, _ = store.Append(ctx, c, varve.Any, varve.NewEvent("Placed", []byte(`{}`)))
	}

	var mu sync.Mutex
	placed := map[string]int{} // the read model
	r, _ := projection.NewRunner(store, projection.Projection{
		Name: "orders-placed", Version: 1,
		Filter: varve.Filter{Categories: []string{"order"}, Types: []string{"Placed"}},
		Handle: func(ctx context.Context, b projection.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range b.Events {
				placed[e.Stream]++
			}
			return nil
		},
	}, projection.Config{})

	ctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	<-r.Live() // caught up
	stop()
	<-done
	fmt.Println(placed["order-1"], placed["order-2"], r.Status().Handled)
	// Output: 2 1 3
}
