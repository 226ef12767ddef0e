package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
)

func Example() {
	dir, err := os.MkdirTemp("", "varve-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	cfg, err := sqlite.ParseURL("sqlite://" + filepath.Join(dir, "events.db") + "?synchronous=full")
	if err != nil {
		log.Fatal(err)
	}
	backend, err := sqlite.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	store, err := varve.New(backend, varve.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // closes the backend

	res, err := store.Append(ctx, "order-42", varve.NoStream,
		varve.Event{Type: "OrderPlaced", Data: []byte(`{"total":12.5}`)},
		varve.Event{Type: "OrderPaid", Data: []byte(`{"by":"card"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("versions", res.FirstVersion, "to", res.LastVersion)
	for e, err := range store.ReadStream(ctx, "order-42") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Version, e.Type, string(e.Data))
	}
	// Output:
	// versions 1 to 2
	// 1 OrderPlaced {"total":12.5}
	// 2 OrderPaid {"by":"card"}
}
