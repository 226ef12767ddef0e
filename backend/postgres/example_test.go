package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

func Example() {
	ctx := context.Background()
	cfg, err := postgres.ParseURL("postgres://postgres@127.0.0.1:5432/test?sslmode=disable&varve_schema=example")
	if err != nil {
		log.Fatal(err)
	}
	b, err := postgres.New(ctx, cfg) // creates the schema on first use
	if err != nil {
		log.Fatal(err)
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	res, err := s.Append(ctx, "order-42", varve.Any, varve.Event{Type: "OrderPlaced", Data: []byte(`{"total":10}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("written at version", res.LastVersion)
}

// Reads from a hot standby: the store opened on the standby reads, its
// writes fail with ErrStandby, and a subscription on it would keep its
// checkpoints on the primary (subscription.Config.Checkpoints).
func ExampleBackend_StandbyStatus() {
	ctx := context.Background()
	b, err := postgres.New(ctx, postgres.Config{
		ConnString: "postgres://postgres@127.0.0.1:5433/test?sslmode=disable", // the standby
		Schema:     "orders",
	})
	if errors.Is(err, postgres.ErrStandby) {
		log.Fatal("the standby has no schema orders yet: open it on the primary first")
	}
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	st, err := b.StandbyStatus(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("standby %v, replayed up to %s, %v since the last replayed commit\n", st.Standby, st.ReplayLSN, st.SinceReplayedCommit)
}
