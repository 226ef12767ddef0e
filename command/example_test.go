package command_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/command"
)

func Example() {
	ctx := context.Background()
	store, _ := varve.New(memory.New(), varve.Config{})
	defer store.Close()

	bus := command.New(command.Validate())
	if err := command.Handle(bus, command.Decide(store, seats)); err != nil {
		panic(err)
	}
	r, err := bus.Dispatch(ctx, "cmd-1", Reserve{Seat: "7F"})
	fmt.Println(r.Stream, r.Version, r.Duplicate, err)
	// A retry of the same command (its answer was lost, say) returns the
	// first outcome and appends nothing.
	r, err = bus.Dispatch(ctx, "cmd-1", Reserve{Seat: "7F"})
	fmt.Println(r.Stream, r.Version, r.Duplicate, err)
	// Another command on the same seat is decided.
	_, err = bus.Dispatch(ctx, "cmd-2", Reserve{Seat: "7F"})
	fmt.Println(errors.Is(err, errTaken))
	_, err = bus.Dispatch(ctx, "cmd-3", Reserve{})
	fmt.Println(errors.Is(err, command.ErrInvalid))
	// Output:
	// seat-7F 1 false <nil>
	// seat-7F 1 true <nil>
	// true
	// true
}
