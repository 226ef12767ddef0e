package subscription_test

import (
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// opener gives a fresh store, isolated from every other test's.
type opener = func(t testing.TB, cfg varve.Config) *varve.Store

// eachBackend runs f as a parallel subtest per backend (memory, SQLite,
// PostgreSQL, NATS), each with stores of its own.
func eachBackend(t *testing.T, f func(t *testing.T, open opener)) {
	t.Helper()
	teststore.Each(t, func(t *testing.T, k teststore.Kind) { f(t, k.Open) })
}
