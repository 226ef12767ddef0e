package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// TestSize: the bytes of the events' data and metadata, less those of a
// deleted stream; a closed backend says so.
func TestSize(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		t.Helper()
		n, err := b.Size(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := size(); n != 0 {
		t.Fatalf("an empty backend: %d bytes", n)
	}
	if _, err := s.Append(ctx, "a", varve.NoStream, varve.Event{Type: "E", Data: make([]byte, 100), Metadata: make([]byte, 20)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "b", varve.NoStream, varve.Event{Type: "E", Data: make([]byte, 1000)}); err != nil {
		t.Fatal(err)
	}
	if n := size(); n != 1120 {
		t.Fatalf("after 1,120 bytes of events: %d", n)
	}
	if err := s.Delete(ctx, "b", varve.Any); err != nil {
		t.Fatal(err)
	}
	if n := size(); n != 120 {
		t.Fatalf("after deleting the stream of 1,000 bytes: %d", n)
	}
	_ = s.Close()
	if _, err := b.Size(ctx); !errors.Is(err, varve.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
