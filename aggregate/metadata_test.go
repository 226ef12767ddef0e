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

// TestMetadata saves events of a version 1 and a version 2 type with the
// correlation and causation ids of several contexts, reads them back, and
// loads the aggregate again (the schema version beside the ids still
// decodes); an event that CausedBy names is the cause of what its handler
// saves.
func TestMetadata(t *testing.T) {
	forEachBackend(t, func(t *testing.T, env *env) {
		ctx := context.Background()
		events := schema.NewRegistry()
		schema.Register[Incremented](events, "Incremented")
		schema.RegisterVersion[Credited](events, "Credited", 2)
		repo, err := aggregate.New(env.store, aggregate.Definition[int64]{Category: env.cat, Events: events,
			Apply: func(n int64, e any) int64 {
				switch e := e.(type) {
				case Incremented:
					return n + int64(e.By)
				case Credited:
					return n + e.Cents
				}
				return n
			}}, aggregate.Config{})
		if err != nil {
			t.Fatal(err)
		}
		// An event stored without ids, and one with a correlation id.
		origin, err := env.store.Append(ctx, env.cat+"-origin", varve.NoStream,
			varve.NewEvent("Started", nil), varve.Event{Type: "Started", Metadata: []byte(`{"correlation_id":"req-9"}`)})
		if err != nil {
			t.Fatal(err)
		}
		var started []varve.RecordedEvent
		for e, err := range env.store.ReadStream(ctx, env.cat+"-origin") {
			if err != nil {
				t.Fatal(err)
			}
			started = append(started, e)
		}
		if len(started) != 2 || origin.LastVersion != 2 {
			t.Fatalf("read %d events", len(started))
		}
		first := started[0].ID.String()
		cases := []struct {
			name string
			ctx  context.Context
			want aggregate.Metadata
		}{
			{"none", ctx, aggregate.Metadata{}},
			{"correlation", aggregate.WithCorrelation(ctx, "req-1"), aggregate.Metadata{CorrelationID: "req-1"}},
			{"both", aggregate.WithMetadata(aggregate.WithCorrelation(ctx, "req-2"), aggregate.Metadata{CausationID: "cmd-7"}),
				aggregate.Metadata{CorrelationID: "req-2", CausationID: "cmd-7"}},
			{"caused by an event without ids", aggregate.CausedBy(ctx, started[0]), aggregate.Metadata{CorrelationID: first, CausationID: first}},
			{"caused by a correlated event", aggregate.CausedBy(ctx, started[1]),
				aggregate.Metadata{CorrelationID: "req-9", CausationID: started[1].ID.String()}},
			{"caused by, then a new correlation", aggregate.WithCorrelation(aggregate.CausedBy(ctx, started[1]), "req-3"),
				aggregate.Metadata{CorrelationID: "req-3", CausationID: started[1].ID.String()}},
		}
		for _, tc := range cases {
			id := tc.name
			a, err := repo.Execute(tc.ctx, id, func(a *aggregate.Aggregate[int64]) error {
				return a.Raise(Incremented{By: 1}, Credited{Cents: 10})
			})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if a.State() != 11 {
				t.Fatalf("%s: state %d, want 11", tc.name, a.State())
			}
			var n int
			for e, err := range env.store.ReadStream(ctx, repo.Stream(id)) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				got, err := aggregate.ReadMetadata(e)
				if err != nil || got != tc.want {
					t.Fatalf("%s: event %d (%s) metadata %+v, %v; want %+v", tc.name, e.Version, e.Metadata, got, err, tc.want)
				}
				var sv struct {
					V int `json:"schema_version"`
				}
				if e.Type == "Credited" && (json.Unmarshal(e.Metadata, &sv) != nil || sv.V != 2) {
					t.Fatalf("%s: Credited lost its schema version: %s", tc.name, e.Metadata)
				}
			}
			if n != 2 {
				t.Fatalf("%s: read %d events, want 2", tc.name, n)
			}
			if a, err := repo.Load(ctx, id, aggregate.FromStore()); err != nil || a.State() != 11 {
				t.Fatalf("%s: reload: %v, %v", tc.name, a, err)
			}
		}
		if _, err := aggregate.ReadMetadata(varve.RecordedEvent{Metadata: []byte(`[1]`)}); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Fatalf("metadata that is not an object: %v", err)
		}
	})
}
