package backendtest_test

import (
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/memory"
)

// A backend runs the conformance suite and the benchmark suite from its own
// tests; the factory opens a fresh backend per test (one sharing a server
// with the others is fine: every test keeps to streams of its own).
func Example() {
	factory := backendtest.Factory{
		New: func(testing.TB) varve.Backend { return memory.New() },
	}
	// In the backend's _test.go:
	//
	//	func TestConformance(t *testing.T) { backendtest.Run(t, factory) }
	//	func BenchmarkSuite(b *testing.B) { backendtest.Benchmark(b, factory) }
	_ = factory
}
