package delivery_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/shred"
	"github.com/varve-go/varve/subscription"
)

// TestSealedDelivery: over a store that opens sealed events, a dispatcher
// needs a subscription that reads them sealed, and opens each event at each
// attempt: the retry of an event whose subject was erased after the first
// attempt sends the erased marker, not the plaintext.
func TestSealedDelivery(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	m, err := shred.NewMasterKey("m1", bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shred.New(b, shred.Config{Master: m})
	if err != nil {
		t.Fatal(err)
	}
	store, err := varve.New(b, varve.Config{Opener: sh})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ev, err := sh.Seal(ctx, "user-9", varve.NewEvent("UserRegistered", []byte("Grace Hopper")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, "user-9", varve.NoStream, ev); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var sent [][]byte
	done := make(chan struct{})
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, bytes.Clone(d.Event.Data))
		if len(sent) == 1 {
			if _, err := sh.Erase(ctx, store, "user-9", shred.EraseOptions{}); err != nil {
				t.Error(err)
			}
			return errors.New("the receiver is down")
		}
		if len(sent) == 2 {
			close(done)
		}
		return nil
	})
	cfg := delivery.Config{Retry: subscription.RetryPolicy{MaxAttempts: -1, MaxAge: time.Hour, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}}

	open, err := subscription.Open(ctx, store, subscription.Config{Name: "opened"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := delivery.New(open, sink, cfg); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("a dispatcher over a subscription that opens events: %v", err)
	}

	sub, err := subscription.Open(ctx, store, subscription.Config{Name: "sealed", Sealed: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := delivery.New(sub, sink, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(runCtx) }()
	select {
	case <-done:
	case err := <-ran:
		t.Fatalf("the dispatcher stopped: %v", err)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if string(sent[0]) != "Grace Hopper" {
		t.Fatalf("first attempt sent %q", sent[0])
	}
	if subj, ok := shred.Erased(sent[1]); !ok || subj != "user-9" || bytes.Contains(sent[1], []byte("Grace")) {
		t.Fatalf("the retry after the erasure sent %q", sent[1])
	}
}
