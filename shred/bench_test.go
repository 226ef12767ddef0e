package shred_test

import (
	"context"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

func BenchmarkSeal(b *testing.B) {
	ctx := context.Background()
	_, sh := open(b, memory.New(), shredConfig(b))
	ev := varve.NewEvent("E", make([]byte, 100))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sh.Seal(ctx, "subject-1", ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	_, sh := open(b, memory.New(), shredConfig(b))
	ev, _ := sh.Seal(ctx, "subject-1", varve.NewEvent("E", make([]byte, 100)))
	evs := make([]varve.RecordedEvent, 10)
	b.ReportAllocs()
	for b.Loop() {
		for i := range evs {
			evs[i].Data = ev.Data
		}
		if err := sh.OpenEvents(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
}
