package aggregate_test

import (
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// backends are the backends every test runs on, in parallel, each store
// fresh: a new memory backend, a new SQLite file, a new PostgreSQL schema.
var backends = func() []struct {
	name string
	open func(t *testing.T) varve.Backend
} {
	var out []struct {
		name string
		open func(t *testing.T) varve.Backend
	}
	for _, k := range teststore.Kinds {
		out = append(out, struct {
			name string
			open func(t *testing.T) varve.Backend
		}{k.Name, func(t *testing.T) varve.Backend { return k.Backend(t) }})
	}
	return out
}()
