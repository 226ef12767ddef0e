package memory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

var payload = []byte(`{"user":"u-123","email":"someone@example.com","n":42}`)

func newStore(b *testing.B) *varve.Store {
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkBaseline is the floor an in-memory store is measured against: a
// mutex and a slice, copying the payload as the store does.
func BenchmarkBaseline(b *testing.B) {
	type rec struct {
		id   uuid.UUID
		data []byte
	}
	var mu sync.Mutex
	var log []rec
	b.ReportAllocs()
	for b.Loop() {
		mu.Lock()
		log = append(log, rec{id: varve.NewEventID(), data: append([]byte(nil), payload...)})
		mu.Unlock()
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := newStore(b)
			ctx := context.Background()
			evs := make([]varve.Event, n)
			b.ReportAllocs()
			for b.Loop() {
				for i := range evs {
					evs[i] = varve.Event{Type: "Appended", Data: payload}
				}
				if _, err := s.Append(ctx, "bench-stream", varve.Any, evs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func BenchmarkAppendParallel(b *testing.B) {
	s := newStore(b)
	ctx := context.Background()
	var worker sync.Map
	var next int64
	var mu sync.Mutex
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		next++
		stream := fmt.Sprintf("bench-%d", next)
		mu.Unlock()
		worker.Store(stream, true)
		evs := make([]varve.Event, 1)
		for pb.Next() {
			evs[0] = varve.Event{Type: "Appended", Data: payload}
			if _, err := s.Append(ctx, stream, varve.Any, evs...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			s := newStore(b)
			ctx := context.Background()
			evs := make([]varve.Event, n)
			for i := range evs {
				evs[i] = varve.Event{Type: "Appended", Data: payload}
			}
			if _, err := s.Append(ctx, "load", varve.NoStream, evs...); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				got := 0
				for _, err := range s.ReadStream(ctx, "load") {
					if err != nil {
						b.Fatal(err)
					}
					got++
				}
				if got != n {
					b.Fatalf("read %d events, want %d", got, n)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
