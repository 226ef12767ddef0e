package aggregate_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/schema"
)

// Credited is at schema version 2 (version 1 held whole euros in "eur");
// it was stored as "Paid" before it was renamed.
type Credited struct {
	Cents int64 `json:"cents"`
}

// TestSchemaEvolution loads an aggregate whose stream holds events of an
// old name and an old schema version, raises one of today's, loads it
// again; a registry that does not validate keeps the repository from
// starting, and an unknown stored type names itself.
func TestSchemaEvolution(t *testing.T) {
	forEachBackend(t, func(t *testing.T, env *env) {
		ctx := context.Background()
		events := schema.NewRegistry()
		schema.RegisterVersion[Credited](events, "Credited", 2)
		events.Alias("Paid", "Credited")
		events.Upcast("Credited", 1, func(data []byte) ([]byte, error) {
			var v1 struct {
				Eur int64 `json:"eur"`
			}
			if err := json.Unmarshal(data, &v1); err != nil {
				return nil, err
			}
			return json.Marshal(Credited{Cents: v1.Eur * 100})
		})
		def := aggregate.Definition[int64]{Category: env.cat, Events: events,
			Apply: func(total int64, e any) int64 { return total + e.(Credited).Cents }}
		repo, err := aggregate.New(env.store, def, aggregate.Config{})
		if err != nil {
			t.Fatal(err)
		}
		stream := env.cat + "-1"
		if _, err := env.store.Append(ctx, stream, varve.NoStream,
			varve.NewEvent("Paid", []byte(`{"eur":2}`)),
			varve.NewEvent("Credited", []byte(`{"eur":1}`)), // version 1 under the new name
			varve.Event{Type: "Credited", Data: []byte(`{"cents":5}`), Metadata: []byte(`{"schema_version":2}`)},
		); err != nil {
			t.Fatal(err)
		}
		if _, err := repo.Execute(ctx, "1", func(a *aggregate.Aggregate[int64]) error {
			if a.State() != 305 {
				t.Errorf("loaded %d, want 305", a.State())
			}
			return a.Raise(Credited{Cents: 7})
		}); err != nil {
			t.Fatal(err)
		}
		a, err := repo.Load(ctx, "1")
		if err != nil || a.State() != 312 {
			t.Fatalf("reloaded %v, %v; want 312", a, err)
		}

		if _, err := env.store.Append(ctx, env.cat+"-2", varve.NoStream, varve.NewEvent("Refunded", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
		_, err = repo.Load(ctx, "2")
		var unknown *schema.UnknownTypeError
		if !errors.Is(err, schema.ErrUnknownEventType) || !errors.As(err, &unknown) || unknown.Type != "Refunded" {
			t.Fatalf("load of an unknown type: %v", err)
		}

		bad := schema.NewRegistry()
		schema.Register[Credited](bad, "Credited")
		bad.Alias("Paid", "Settled")
		def.Events = bad
		if _, err := aggregate.New(env.store, def, aggregate.Config{}); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Fatalf("New with an alias of an unregistered type: %v", err)
		}
	})
}
