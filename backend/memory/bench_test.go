package memory_test

import (
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/internal/workload"
)

var benchFactory = backendtest.Factory{
	New: func(testing.TB) varve.Backend { return memory.New() },
}

func BenchmarkSuite(b *testing.B) { backendtest.Benchmark(b, benchFactory) }

func TestScale(t *testing.T) {
	backendtest.RunScale(t, benchFactory, backendtest.ScaleConfig{Events: 1_000_000})
}

// TestDCBScale: DCB as the log grows to 10 million events (opt-in).
func TestDCBScale(t *testing.T) { backendtest.RunDCBScale(t, benchFactory) }

// BenchmarkBaseline is the floor the memory backend is measured against: a
// bare mutex and slice that keep each event's id, type and a copy of its
// payload, as the backend does.
func BenchmarkBaseline(b *testing.B) {
	type rec struct {
		id   uuid.UUID
		typ  string
		data []byte
	}
	var mu sync.Mutex
	var log []rec
	b.ReportAllocs()
	for b.Loop() {
		mu.Lock()
		log = append(log, rec{id: varve.NewEventID(), typ: "OrderPlaced", data: append([]byte(nil), workload.Payload...)})
		mu.Unlock()
	}
	b.ReportMetric(float64(len(log))/b.Elapsed().Seconds(), "events/s")
}
