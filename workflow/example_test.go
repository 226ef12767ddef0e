package workflow_test

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/workflow"
)

type printer struct{}

func (printer) Send(_ context.Context, c workflow.Command) error {
	fmt.Println("send", c.Type, "for", c.Instance)
	return nil
}

func Example() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	def := workflow.Definition[int]{
		Name:   "greeter",
		Route:  func(e *varve.RecordedEvent) (string, bool) { return string(e.Data), e.Type == "Joined" },
		Evolve: func(n int, e *varve.RecordedEvent) int { return n + 1 },
		Decide: func(n int, in workflow.Input) (workflow.Decision, error) {
			if n > 0 {
				return workflow.Decision{}, nil // greet once
			}
			return workflow.Decision{Events: []varve.Event{{Type: "greeted"}}, Commands: []workflow.Command{{Type: "SendWelcome"}}}, nil
		},
	}
	r, err := workflow.NewRunner(store, def, printer{}, nil)
	if err != nil {
		panic(err)
	}
	if _, err := store.Append(ctx, "users-ann", varve.NoStream, varve.NewEvent("Joined", []byte("ann"))); err != nil {
		panic(err)
	}
	for e, err := range store.ReadStream(ctx, "users-ann") {
		if err != nil {
			panic(err)
		}
		_ = r.Handle(ctx, e)
		_ = r.Handle(ctx, e) // a redelivery changes nothing
	}
	if _, err := r.Relay(ctx, "ann"); err != nil {
		panic(err)
	}
	// Output: send SendWelcome for ann
}
