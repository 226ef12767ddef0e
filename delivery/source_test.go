package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/subscription"
)

// feed is a Source that keeps its events in no store: batches of events
// handed out in order, and the checkpoints saved.
type feed struct {
	batches [][]varve.RecordedEvent
	next    int

	mu    sync.Mutex
	saved []varve.Position
}

func (f *feed) Name() string             { return "feed" }
func (f *feed) Position() varve.Position { return varve.Start }

func (f *feed) Next(ctx context.Context) (subscription.Batch, error) {
	if f.next == len(f.batches) {
		<-ctx.Done()
		return subscription.Batch{}, ctx.Err()
	}
	b := f.batches[f.next]
	f.next++
	return subscription.Batch{Events: b, Through: b[len(b)-1].Position}, nil
}

func (f *feed) SaveCheckpoint(_ context.Context, pos varve.Position) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saved = append(f.saved, pos)
	return nil
}

// newFeed makes batches of 3 events over keys k0..k3, positions {b+1, i+1}.
func newFeed(batches int) (*feed, varve.Position) {
	f := &feed{}
	var last varve.Position
	for b := range batches {
		var evs []varve.RecordedEvent
		for i := range 3 {
			last = varve.Position{Commit: uint64(b + 1), Seq: uint64(i + 1)}
			evs = append(evs, varve.RecordedEvent{Stream: fmt.Sprintf("k%d", (b+i)%4), Type: "change",
				Data: fmt.Appendf(nil, `{"b":%d,"i":%d}`, b, i), Position: last})
		}
		f.batches = append(f.batches, evs)
	}
	return f, last
}

func TestNewFromSourceRequiresParked(t *testing.T) {
	f, _ := newFeed(1)
	sink := delivery.SinkFunc(func(context.Context, delivery.Delivery) error { return nil })
	if _, err := delivery.NewFromSource(f, sink, delivery.Config{}); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("without Parked: %v, want ErrInvalidArgument", err)
	}
	if _, err := delivery.NewFromSource(nil, sink, delivery.Config{}); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Fatalf("nil source: %v, want ErrInvalidArgument", err)
	}
}

// TestSourceWithoutStore: a storeless source is delivered in per-key order,
// its checkpoint saved; an event the sink rejects is parked with its
// payload, and replaying it delivers that payload.
func TestSourceWithoutStore(t *testing.T) {
	store := newStore(t)
	f, last := newFeed(20)
	rejected := varve.Position{Commit: 5, Seq: 2}
	rec := newRecorder(true)
	var mu sync.Mutex
	order := map[string][]varve.Position{}
	rec.fail = func(d delivery.Delivery) error {
		if d.Event.Position == rejected {
			return delivery.Permanent(errors.New("no"))
		}
		mu.Lock()
		order[d.Event.Stream] = append(order[d.Event.Stream], d.Event.Position)
		mu.Unlock()
		return nil
	}
	parked := delivery.NewParked(store, "feed")
	d, err := delivery.NewFromSource(f, rec, delivery.Config{Concurrency: 4, Parked: parked, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	if err := d.WaitFor(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rec.overlaps > 0 {
		t.Errorf("%d overlapping deliveries of one key", rec.overlaps)
	}
	n := 0
	for key, ps := range order {
		for i := 1; i < len(ps); i++ {
			if !ps[i-1].Less(ps[i]) {
				t.Errorf("key %s: %v after %v", key, ps[i], ps[i-1])
			}
		}
		n += len(ps)
	}
	// The rejected event's key parks its later events too.
	st := d.Stats()
	if int(st.Delivered)+int(st.Parked) != 60 || st.Parked == 0 || n != int(st.Delivered) {
		t.Errorf("delivered %d (recorded %d), parked %d, want 60 in all and some parked", st.Delivered, n, st.Parked)
	}
	if f.saved[len(f.saved)-1] != last {
		t.Errorf("last checkpoint saved %v, want %v", f.saved[len(f.saved)-1], last)
	}
	list, err := parked.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != int(st.Parked) || list[0].Position != rejected || list[0].Event == nil {
		t.Fatalf("parked %+v, want %d records from %v with their events", list, st.Parked, rejected)
	}
	var replayed []string
	res, err := parked.Replay(context.Background(), delivery.SinkFunc(func(_ context.Context, d delivery.Delivery) error {
		replayed = append(replayed, string(d.Event.Data))
		return nil
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Delivered) != len(list) || replayed[0] != `{"b":4,"i":1}` {
		t.Errorf("replayed %d of %d, first %q, want the rejected event's payload", len(res.Delivered), len(list), replayed[0])
	}
}
