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

// chanSource is a Source of events that come from elsewhere than a varve
// store: whatever is sent on it, one batch per event.
type chanSource struct {
	events chan varve.RecordedEvent
	saved  varve.Position
}

func (s *chanSource) Name() string             { return "hooks" }
func (s *chanSource) Position() varve.Position { return s.saved }

func (s *chanSource) Next(ctx context.Context) (subscription.Batch, error) {
	select {
	case e := <-s.events:
		return subscription.Batch{Events: []varve.RecordedEvent{e}, Through: e.Position}, nil
	case <-ctx.Done():
		return subscription.Batch{}, ctx.Err()
	}
}

func (s *chanSource) SaveCheckpoint(_ context.Context, pos varve.Position) error {
	s.saved = pos // a real source makes it durable
	return nil
}

// A dispatcher over a source that keeps its events in no store needs a
// parked store of its own, which then keeps the events it parks.
func ExampleNewFromSource() {
	ctx := context.Background()
	parkedStore, _ := varve.New(memory.New(), varve.Config{})
	defer parkedStore.Close()
	src := &chanSource{events: make(chan varve.RecordedEvent, 2)}
	src.events <- varve.RecordedEvent{Stream: "order-1", Type: "OrderPlaced", Position: varve.Position{Commit: 1, Seq: 1}}
	src.events <- varve.RecordedEvent{Stream: "order-1", Type: "OrderPaid", Position: varve.Position{Commit: 2, Seq: 1}}

	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		fmt.Println(d.Key, d.Event.Stream, d.Event.Type)
		return nil
	})
	d, err := delivery.NewFromSource(src, sink, delivery.Config{Parked: delivery.NewParked(parkedStore, src.Name())})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- d.Run(runCtx) }()
	if err := d.WaitFor(ctx, varve.Position{Commit: 2, Seq: 1}); err != nil {
		panic(err)
	}
	stop()
	if err := <-done; err != nil {
		panic(err)
	}
	fmt.Println("checkpoint", d.Stats().Saved)
	// Output:
	// hooks:1:1 order-1 OrderPlaced
	// hooks:2:1 order-1 OrderPaid
	// checkpoint 2:1
}
