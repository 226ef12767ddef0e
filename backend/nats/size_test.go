package nats

import (
	"context"
	"errors"
	"testing"

	"github.com/varve-go/varve"
)

// TestSize: the stream grows by what is appended, the checkpoint bucket
// counts once it exists; a closed backend says so.
func TestSize(t *testing.T) {
	ctx := context.Background()
	b := open(t, testConfig(embeddedURL, uniqueName("size")))
	size := func() int64 {
		t.Helper()
		n, err := b.Size(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := size()
	const data = 256 << 10
	if _, err := b.Append(ctx, varve.AppendRequest{Stream: "s", Expected: varve.NoStream,
		Events: []varve.Event{{ID: varve.NewEventID(), Type: "E", Data: make([]byte, data)}}}); err != nil {
		t.Fatal(err)
	}
	appended := size()
	if appended-before < data {
		t.Fatalf("after %d bytes appended: %d bytes, before %d", data, appended, before)
	}
	if err := b.SaveCheckpoint(ctx, "c", varve.Position{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if n := size(); n <= appended {
		t.Fatalf("after a checkpoint: %d bytes, before it %d", n, appended)
	}
	_ = b.Close()
	if _, err := b.Size(ctx); !errors.Is(err, varve.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
