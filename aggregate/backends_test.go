package aggregate_test

import (
	"context"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/internal/testenv"
)

// backends are the backends every test runs on, in parallel. Each test uses
// a category of its own (a random suffix), so runs can share a server and
// leave their streams behind. Add a line here for every backend that lands;
// server backends should get their URL from internal/testenv, which skips or,
// with CI=true, fails when the server is missing.
var backends = []struct {
	name string
	open func(t *testing.T) varve.Backend
}{
	{"memory", func(*testing.T) varve.Backend { return memory.New() }},
	{"sqlite", func(t *testing.T) varve.Backend {
		b, err := sqlite.New(context.Background(), sqlite.Config{Path: t.TempDir() + "/aggregate.db"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
	{"postgres", func(t *testing.T) varve.Backend {
		cfg, err := postgres.ParseURL(testenv.PostgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Schema = "varve_aggregate_test"
		b, err := postgres.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
}
