package postgres_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// TestSize: the schema's tables grow with what is appended; a closed
// backend says so.
func TestSize(t *testing.T) {
	ctx := context.Background()
	b := open(t, config(t, fmt.Sprintf("%s_size_%d", testSchema, time.Now().UnixNano()%1e6)))
	before, err := b.Size(ctx)
	if err != nil || before <= 0 {
		t.Fatalf("an empty schema: %d bytes, %v", before, err)
	}
	const data = 1 << 20
	ev := make([]varve.Event, 64)
	for i := range ev {
		// Random bytes: TOAST compresses others.
		d := make([]byte, data/len(ev))
		_, _ = rand.Read(d)
		ev[i] = varve.Event{ID: varve.NewEventID(), Type: "E", Data: d}
	}
	if _, err := b.Append(ctx, varve.AppendRequest{Stream: "s", Expected: varve.NoStream, Events: ev}); err != nil {
		t.Fatal(err)
	}
	after, err := b.Size(ctx)
	if err != nil || after-before < data/2 {
		t.Fatalf("after %d bytes appended: %d bytes, before %d (%v)", data, after, before, err)
	}
	_ = b.Close()
	if _, err := b.Size(ctx); !errors.Is(err, varve.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
