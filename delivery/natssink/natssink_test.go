package natssink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/internal/deliverytest"
	"github.com/varve-go/varve/delivery/natssink"
	"github.com/varve-go/varve/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSink: events reach the subject once each, with Nats-Msg-Id set to
// the idempotency key, so a redelivery is dropped by JetStream.
func TestSink(t *testing.T) {
	t.Parallel()
	nc, err := nats.Connect(testenv.NATSURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := fmt.Sprintf("varve_delivery_test_%d", time.Now().UnixNano())
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.MemoryStorage, Duplicates: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer js.DeleteStream(context.Background(), name)

	sink, err := natssink.New(js, natssink.Config{Subject: name + ".events"})
	if err != nil {
		t.Fatal(err)
	}
	s := deliverytest.NewStore(t)
	end := deliverytest.Fill(t, s, "nats", 4, 20, 1)
	r := deliverytest.Start(t, s, "to-nats", sink, delivery.Config{Concurrency: 4})
	r.Wait(t, end)
	r.Stop(t)
	// A redelivery of an event, as after a crash, is a duplicate.
	var first varve.RecordedEvent
	for e := range s.ReadAll(ctx, varve.Start, varve.Limit(1)) {
		first = e
	}
	if err := sink.Deliver(ctx, delivery.Delivery{Subscription: "to-nats", Event: first, Attempt: 1, Key: delivery.Key("to-nats", first.Position)}); err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 20 {
		t.Fatalf("%d messages in the stream, want 20", info.State.Msgs)
	}
	msg, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var p delivery.Payload
	if err := json.Unmarshal(msg.Data, &p); err != nil {
		t.Fatal(err)
	}
	if id := msg.Header.Get(jetstream.MsgIDHeader); id != p.IdempotencyKey || id != delivery.Key("to-nats", p.Position) ||
		msg.Header.Get(delivery.HeaderStream) != p.Stream || msg.Header.Get(delivery.HeaderPosition) != p.Position.String() {
		t.Fatalf("headers %v for payload %+v", msg.Header, p)
	}
}
