package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/schema"
)

// Events written under an old name and an old payload shape are read as
// today's Go type: the decode path of a projection's handler (and of
// package aggregate).
func Example() {
	type Deposited struct {
		Cents int64 `json:"cents"`
	}
	events := schema.NewRegistry()
	schema.RegisterVersion[Deposited](events, "Deposited", 2)
	events.Alias("MoneyIn", "Deposited") // the name of version 1
	events.Upcast("Deposited", 1, func(data []byte) ([]byte, error) {
		var v1 struct{ Euros int64 }
		if err := json.Unmarshal(data, &v1); err != nil {
			return nil, err
		}
		return json.Marshal(Deposited{Cents: v1.Euros * 100})
	})
	if err := events.Validate(); err != nil { // at start-up
		log.Fatal(err)
	}

	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	now, _, err := events.Encode(schema.JSON{}, Deposited{Cents: 250})
	if err != nil {
		log.Fatal(err)
	}
	old := varve.NewEvent("MoneyIn", []byte(`{"Euros":3}`))
	if _, err := store.Append(ctx, "account-1", varve.NoStream, old, now); err != nil {
		log.Fatal(err)
	}
	for e, err := range store.ReadStream(ctx, "account-1") {
		if err != nil {
			log.Fatal(err)
		}
		v, err := events.DecodeEvent(schema.JSON{}, e)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %+v\n", e.Type, v)
	}
	// Output:
	// MoneyIn {Cents:300}
	// Deposited {Cents:250}
}
