package workload

import (
	"context"
	"strconv"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/command"
	"github.com/varve-go/varve/schema"
)

// Commands returns the workloads of the command bus (issue #41): the
// same decision, raising one event on one of 100 counter aggregates, run
// directly with aggregate.Repository.Execute and through a command.Bus
// with its validation middleware (which also stamps the correlation and
// causation ids into the events' metadata) and command.Aggregate's
// idempotency by command id (Repository.ExecuteOnce). The difference of their
// latencies in one run is the bus's cost per command.
func Commands() []Workload {
	return []Workload{
		{Name: "command-direct", Bench: "Command/Direct", About: "raise 1 event on one of 100 counters with aggregate.Repository.Execute",
			Workers: 1, Unit: Events, Setup: commandSetup(false)},
		{Name: "command-bus", Bench: "Command/Bus", About: "the same decision dispatched through a command.Bus (validation, correlation ids, idempotency by command id)",
			Workers: 1, Unit: Events, Setup: commandSetup(true)},
	}
}

type incremented struct{ By int }

type increment struct {
	Counter string
	By      int
}

func commandSetup(bus bool) func(ctx context.Context, s *varve.Store, p Params) (Prepared, error) {
	return func(ctx context.Context, s *varve.Store, p Params) (Prepared, error) {
		events := schema.NewRegistry()
		schema.Register[incremented](events, "Incremented")
		repo, err := aggregate.New(s, aggregate.Definition[int]{Category: p.Prefix + "counter", Events: events,
			Apply: func(n int, e any) int { return n + e.(incremented).By }}, aggregate.Config{CacheSize: 1000})
		if err != nil {
			return Prepared{}, err
		}
		raise := func(a *aggregate.Aggregate[int], c increment) error { return a.Raise(incremented{By: c.By}) }
		b := command.New(command.Validate())
		if err := command.Handle(b, command.Aggregate(repo, func(c increment) string { return c.Counter }, raise)); err != nil {
			return Prepared{}, err
		}
		return Prepared{PerOp: 1, NewOp: func(worker int) Op {
			n := 0
			return func(ctx context.Context) (int, error) {
				c := increment{Counter: strconv.Itoa(worker) + "c" + strconv.Itoa(n%100), By: 1}
				n++
				if bus {
					_, err := b.Dispatch(ctx, uuid.NewString(), c)
					return 1, err
				}
				_, err := repo.Execute(ctx, c.Counter, func(a *aggregate.Aggregate[int]) error { return raise(a, c) })
				return 1, err
			}
		}}, nil
	}
}
