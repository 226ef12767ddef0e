// Package orderfulfilment is a worked example of a durable workflow: an
// order reserves stock, takes payment and ships; when payment does not
// arrive before its deadline the order is cancelled and compensated (the
// stock is released and any captured amount refunded).
//
// Inputs are events of other services, each carrying the order id as its
// data: OrderPlaced, StockReserved, PaymentTaken, Shipped. Commands go out
// through a [workflow.Sender]: ReserveStock, TakePayment, Ship, and on
// timeout ReleaseStock and Refund.
//
// The tests drive it step by step (Handle, Relay, FireDue) and, as a
// service would run it, with workflow.Runner.Run in two processes' worth of
// runners splitting the orders into segments under leases.
package orderfulfilment

import (
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/workflow"
)

// PaymentTimeout is how long an order waits for its payment.
const PaymentTimeout = 15 * time.Minute

// Order is the state of one order's workflow.
type Order struct {
	Status   string // placed, reserved, paid, shipped, cancelled
	Reserved bool
}

// Definition returns the workflow; clock dates the payment deadline.
func Definition(name string, clock workflow.Clock) workflow.Definition[Order] {
	return workflow.Definition[Order]{
		Name: name,
		Route: func(e *varve.RecordedEvent) (string, bool) {
			switch e.Type {
			case "OrderPlaced", "StockReserved", "PaymentTaken", "Shipped":
				return string(e.Data), len(e.Data) > 0
			}
			return "", false
		},
		Evolve: func(o Order, e *varve.RecordedEvent) Order {
			o.Status = e.Type
			if e.Type == "reserved" {
				o.Reserved = true
			}
			return o
		},
		Decide: func(o Order, in workflow.Input) (workflow.Decision, error) {
			cmd := func(t string) workflow.Command { return workflow.Command{Type: t, Data: in.Data} }
			switch {
			case in.Type == "OrderPlaced" && o.Status == "":
				return workflow.Decision{
					Events:   []varve.Event{{Type: "placed"}},
					Commands: []workflow.Command{cmd("ReserveStock")},
					Timers:   []workflow.Timer{{ID: "payment", Due: clock.Now().Add(PaymentTimeout)}},
				}, nil
			case in.Type == "StockReserved" && o.Status == "placed":
				return workflow.Decision{Events: []varve.Event{{Type: "reserved"}}, Commands: []workflow.Command{cmd("TakePayment")}}, nil
			case in.Type == "PaymentTaken" && o.Status == "reserved":
				return workflow.Decision{Events: []varve.Event{{Type: "paid"}}, Commands: []workflow.Command{cmd("Ship")}, Cancel: []string{"payment"}}, nil
			case in.Type == "Shipped" && o.Status == "paid":
				return workflow.Decision{Events: []varve.Event{{Type: "shipped"}}}, nil
			case in.Timer == "payment" && (o.Status == "placed" || o.Status == "reserved"):
				d := workflow.Decision{Events: []varve.Event{{Type: "cancelled"}}, Commands: []workflow.Command{{Type: "Refund"}}}
				if o.Reserved {
					d.Commands = append(d.Commands, workflow.Command{Type: "ReleaseStock"})
				}
				return d, nil
			}
			return workflow.Decision{}, nil // late or repeated input: nothing to do
		},
	}
}
