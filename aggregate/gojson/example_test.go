package gojson_test

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/aggregate/gojson"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/schema"
)

type Counter struct{ N int }

type Incremented struct {
	By int `json:"by"`
}

// Example: a repository that encodes its events and snapshots with gojson;
// the stored JSON is the same as with the default codec.
func Example() {
	ctx := context.Background()
	store, _ := varve.New(memory.New(), varve.Config{})
	defer store.Close()

	events := schema.NewRegistry()
	schema.Register[Incremented](events, "Incremented")
	counters, err := aggregate.New(store, aggregate.Definition[Counter]{
		Category: "counter",
		Events:   events,
		Codec:    gojson.Codec{},
		Apply: func(c Counter, e any) Counter {
			c.N += e.(Incremented).By
			return c
		},
	}, aggregate.Config{})
	if err != nil {
		panic(err)
	}
	if _, err := counters.Execute(ctx, "c-1", func(a *aggregate.Aggregate[Counter]) error {
		return a.Raise(Incremented{By: 2})
	}); err != nil {
		panic(err)
	}
	for e, err := range store.ReadStream(ctx, "counter-c-1") {
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Type, string(e.Data))
	}
	// Output:
	// Incremented {"by":2}
}
