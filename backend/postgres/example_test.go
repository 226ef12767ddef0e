package postgres_test

import (
	"context"
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
