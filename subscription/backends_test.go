package subscription_test

import (
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// opener gives a fresh store, isolated from every other test's.
type opener func(t testing.TB, cfg varve.Config) *varve.Store

// testBackends are the backends that the backend-dependent tests (live
// tails, checkpoints, parking) run on. Add SQLite, PostgreSQL and NATS here
// as they land, with an opener that gives each call its own file, schema or
// subject prefix.
var testBackends = []struct {
	name string
	open opener
}{
	{"memory", func(t testing.TB, cfg varve.Config) *varve.Store {
		t.Helper()
		s, err := varve.New(memory.New(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

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
