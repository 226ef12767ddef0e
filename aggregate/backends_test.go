package aggregate_test

import (
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
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
}
