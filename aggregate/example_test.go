package aggregate_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/schema"
)

type Counter struct{ N int }

type Incremented struct{ By int }

func Example() {
	ctx := context.Background()
	store, _ := varve.New(memory.New(), varve.Config{})
	defer store.Close()

	events := schema.NewRegistry()
	schema.Register[Incremented](events, "Incremented")
	counters, err := aggregate.New(store, aggregate.Definition[Counter]{
		Category: "counter",
		Events:   events,
		Apply: func(c Counter, e any) Counter {
			if e, ok := e.(Incremented); ok {
				c.N += e.By
			}
			return c
		},
	}, aggregate.Config{SnapshotEvery: 100, CacheSize: 10_000})
	if err != nil {
		panic(err)
	}

	// Execute loads (or creates), runs the command, saves at the loaded
	// version and retries on a conflict.
	for range 3 {
		if _, err := counters.Execute(ctx, "c-1", func(a *aggregate.Aggregate[Counter]) error {
			return a.Raise(Incremented{By: 2})
		}); err != nil {
			panic(err)
		}
	}
	c, _ := counters.Load(ctx, "c-1")
	fmt.Println(c.Stream(), "version", c.Version(), "N", c.State().N)

	// Two writers that loaded the same version: the second one conflicts.
	a, _ := counters.Load(ctx, "c-1")
	b, _ := counters.Load(ctx, "c-1")
	a.Raise(Incremented{By: 1})
	b.Raise(Incremented{By: 1})
	fmt.Println("first save:", counters.Save(ctx, a))
	err = counters.Save(ctx, b)
	fmt.Println("second save conflicts:", errors.Is(err, varve.ErrWrongExpectedVersion))
	// Output:
	// counter-c-1 version 3 N 6
	// first save: <nil>
	// second save conflicts: true
}

func ExampleRegister() {
	events := schema.NewRegistry()
	schema.Register[Incremented](events, "Incremented")

	name, _ := events.Name(Incremented{By: 1})
	fmt.Println(name)
	e, _ := events.Decode(schema.JSON{}, "Incremented", []byte(`{"By":5}`))
	fmt.Printf("%#v\n", e)
	_, err := events.Decode(schema.JSON{}, "Reset", []byte(`{}`))
	fmt.Println(errors.Is(err, schema.ErrUnknownEventType), err)
	// Output:
	// Incremented
	// aggregate_test.Incremented{By:5}
	// true schema: unknown event type "Reset" (register it, or alias it to its new name)
}

// A handler of an event passes CausedBy's context to the repository: the
// events it saves name the handled event as their cause, and carry on its
// correlation id.
func ExampleCausedBy() {
	ctx := context.Background()
	store, _ := varve.New(memory.New(), varve.Config{})
	defer store.Close()
	events := schema.NewRegistry()
	schema.Register[Incremented](events, "Incremented")
	counters, _ := aggregate.New(store, aggregate.Definition[Counter]{
		Category: "counter",
		Events:   events,
		Apply:    func(c Counter, e any) Counter { c.N += e.(Incremented).By; return c },
	}, aggregate.Config{})

	// At the edge: a request's id becomes the correlation id.
	req := aggregate.WithCorrelation(ctx, "request-42")
	counters.Execute(req, "a", func(a *aggregate.Aggregate[Counter]) error { return a.Raise(Incremented{By: 1}) })

	// A reactor handles that event and changes another counter.
	for e := range store.ReadStream(ctx, "counter-a") {
		counters.Execute(aggregate.CausedBy(ctx, e), "b", func(a *aggregate.Aggregate[Counter]) error {
			return a.Raise(Incremented{By: 10})
		})
		for caused := range store.ReadStream(ctx, "counter-b") {
			m, _ := aggregate.ReadMetadata(caused)
			fmt.Println("correlation:", m.CorrelationID)
			fmt.Println("caused by counter-a's event:", m.CausationID == e.ID.String())
		}
	}
	// Output:
	// correlation: request-42
	// caused by counter-a's event: true
}
