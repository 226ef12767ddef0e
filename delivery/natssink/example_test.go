package natssink_test

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve/delivery/natssink"
)

func ExampleNew() {
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	// The subject must belong to a JetStream stream; with a duplicate
	// window, the stream drops redeliveries by their idempotency key.
	sink, err := natssink.New(js, natssink.Config{Subject: "orders.events"})
	if err != nil {
		panic(err)
	}
	_ = sink // pass sink to delivery.New
}
