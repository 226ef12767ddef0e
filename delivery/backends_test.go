package delivery_test

import (
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// opener gives a fresh store, isolated from every other test's.
type opener func(t testing.TB, cfg varve.Config) *varve.Store

// testBackends are the backends that the backend-dependent tests (live
// tails, checkpoints, parking) run on, each store fresh and isolated.
var testBackends = func() []struct {
	name string
	open opener
} {
	var out []struct {
		name string
		open opener
	}
	for _, k := range teststore.Kinds {
		out = append(out, struct {
			name string
			open opener
		}{k.Name, func(t testing.TB, cfg varve.Config) *varve.Store { t.Helper(); return k.Open(t, cfg) }})
	}
	return out
}()

// eachBackend runs f as a parallel subtest per backend.
func eachBackend(t *testing.T, f func(t *testing.T, open opener)) {
	t.Helper()
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.open)
		})
	}
}
