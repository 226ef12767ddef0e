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

// sent hands each command to a channel.
type sent chan workflow.Command

func (s sent) Send(ctx context.Context, c workflow.Command) error {
	select {
	case s <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func ExampleRunner_Run() {
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
			return workflow.Decision{Events: []varve.Event{{Type: "greeted"}}, Commands: []workflow.Command{{Type: "SendWelcome"}}}, nil
		},
	}
	out := make(sent, 1)
	r, err := workflow.NewRunner(store, def, out, nil)
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		// Several processes would set Lease: subscription.Lease{Holder: "host-1", Segments: 8}.
		done <- r.Run(ctx, workflow.RunConfig{Filter: varve.Filter{Categories: []string{"users"}}})
	}()
	if _, err := store.Append(ctx, "users-ann", varve.NoStream, varve.NewEvent("Joined", []byte("ann"))); err != nil {
		panic(err)
	}
	c := <-out
	fmt.Println("send", c.Type, "for", c.Instance)
	stop()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output: send SendWelcome for ann
}
