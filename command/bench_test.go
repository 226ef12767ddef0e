package command_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/command"
	"github.com/varve-go/varve/dcb"
	"github.com/varve-go/varve/schema"
)

// BenchmarkBus compares a command dispatched through the bus (validation
// middleware, idempotency by command id) with the same decision run
// directly, on the memory backend. The bus's aggregate row also stamps
// the correlation and causation ids into the events' metadata, which the
// direct row does not. Interleave rounds with a shell loop of -count 1
// runs (see docs/benchmarks.md).
func BenchmarkBus(b *testing.B) {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	events := schema.NewRegistry()
	schema.Register[Incremented](events, "Incremented")
	repo, err := aggregate.New(store, aggregate.Definition[int]{Category: "counter", Events: events,
		Apply: func(n int, e any) int { return n + e.(Incremented).By }}, aggregate.Config{CacheSize: 1000})
	if err != nil {
		b.Fatal(err)
	}
	bus := newBus(b, store, command.Validate())
	if err := command.Handle(bus, command.Aggregate(repo, func(c Increment) string { return c.Counter },
		func(a *aggregate.Aggregate[int], c Increment) error { return a.Raise(Incremented{By: c.By}) })); err != nil {
		b.Fatal(err)
	}
	n := 0
	next := func(prefix string) string { n++; return prefix + strconv.Itoa(n) }
	b.Run("dcb/direct", func(b *testing.B) {
		for b.Loop() {
			c := Reserve{Seat: next("d")}
			if _, _, err := dcb.Execute(ctx, store, seats.Query(c), false, seats.Apply,
				func(s bool) (dcb.Decision, error) { return seats.Decide(s, c) }, dcb.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dcb/bus", func(b *testing.B) {
		for b.Loop() {
			if _, err := bus.Dispatch(ctx, next("c"), Reserve{Seat: next("b")}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("aggregate/direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := repo.Execute(ctx, "a"+strconv.Itoa(n%100), func(a *aggregate.Aggregate[int]) error {
				return a.Raise(Incremented{By: 1})
			}); err != nil {
				b.Fatal(err)
			}
			n++
		}
	})
	b.Run("aggregate/bus", func(b *testing.B) {
		for b.Loop() {
			if _, err := bus.Dispatch(ctx, next("c"), Increment{Counter: "b" + strconv.Itoa(n%100), By: 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
