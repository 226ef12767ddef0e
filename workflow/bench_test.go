package workflow

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/backend/sqlite"
)

// BenchmarkStep: one workflow step (load the instance, Decide, one append of
// inbox + state + outbox + timer) per op, on a new instance each op, against
// the baseline of appending the same four events to a new stream directly.
//
//	go test -run '^$' -bench Step -count 3 ./workflow
func BenchmarkStep(b *testing.B) {
	backends := map[string]func(b *testing.B) varve.Backend{
		"memory": func(*testing.B) varve.Backend { return memory.New() },
		"sqlite": func(b *testing.B) varve.Backend {
			be, err := sqlite.New(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "b.db")})
			if err != nil {
				b.Fatal(err)
			}
			return be
		},
	}
	for _, name := range []string{"memory", "sqlite"} {
		ctx := context.Background()
		b.Run(name+"/append-baseline", func(b *testing.B) {
			store, err := varve.New(backends[name](b), varve.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			for i := 0; b.Loop(); i++ {
				evs := []varve.Event{varve.NewEvent("a", []byte(`{}`)), varve.NewEvent("b", nil), varve.NewEvent("c", []byte(`{}`)), varve.NewEvent("d", []byte(`{}`))}
				if _, err := store.Append(ctx, fmt.Sprintf("base-%d", i), varve.NoStream, evs...); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/step", func(b *testing.B) {
			store, err := varve.New(backends[name](b), varve.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			r, err := NewRunner(store, orderDef("bench"), nil, &fakeClock{now: t0})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				e := varve.RecordedEvent{ID: varve.NewEventID(), Type: "OrderPlaced", Data: []byte(fmt.Sprint(i))}
				if err := r.Handle(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
