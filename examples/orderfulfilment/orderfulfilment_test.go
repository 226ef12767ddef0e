package orderfulfilment

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/workflow"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

type outbox struct{ types []string }

func (o *outbox) Send(_ context.Context, c workflow.Command) error {
	o.types = append(o.types, c.Type)
	return nil
}

func TestOrderFulfilment(t *testing.T) {
	cases := []struct {
		name   string
		inputs []string
		wait   time.Duration
		status string
		sent   []string
	}{
		{"happy", []string{"OrderPlaced", "StockReserved", "PaymentTaken", "Shipped"}, time.Hour, "shipped",
			[]string{"ReserveStock", "TakePayment", "Ship"}},
		{"payment times out", []string{"OrderPlaced", "StockReserved"}, PaymentTimeout, "cancelled",
			[]string{"ReserveStock", "TakePayment", "Refund", "ReleaseStock"}},
		{"late payment ignored", []string{"OrderPlaced", "StockReserved"}, PaymentTimeout, "cancelled",
			[]string{"ReserveStock", "TakePayment", "Refund", "ReleaseStock"}},
		{"times out before stock", []string{"OrderPlaced"}, PaymentTimeout, "cancelled",
			[]string{"ReserveStock", "Refund"}},
	}
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
				out := &outbox{}
				name := fmt.Sprintf("order%x", rand.Uint64())
				r, err := workflow.NewRunner(store, Definition(name, clk), out, clk)
				if err != nil {
					t.Fatal(err)
				}
				var last varve.Position
				handle := func(typ string) {
					res, err := store.Append(ctx, name+"src", varve.Any, varve.NewEvent(typ, []byte("o1")))
					if err != nil {
						t.Fatal(err)
					}
					for e, err := range store.ReadStream(ctx, name+"src", varve.From(res.FirstVersion)) {
						if err != nil {
							t.Fatal(err)
						}
						if err := r.Handle(ctx, e); err != nil {
							t.Fatal(err)
						}
					}
					if _, err := r.Relay(ctx, "o1"); err != nil {
						t.Fatal(err)
					}
				}
				for _, typ := range tc.inputs {
					handle(typ)
				}
				for e, err := range store.ReadStream(ctx, r.Stream("o1")) {
					if err != nil {
						t.Fatal(err)
					}
					last = e.Position
				}
				clk.add(tc.wait)
				if _, err := r.FireDue(ctx, last); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Relay(ctx, "o1"); err != nil {
					t.Fatal(err)
				}
				if tc.name == "late payment ignored" {
					handle("PaymentTaken")
				}
				inst, err := r.Load(ctx, "o1")
				if err != nil {
					t.Fatal(err)
				}
				if inst.State.Status != tc.status || !slices.Equal(out.types, tc.sent) {
					t.Fatalf("status %q, sent %v; want %q, %v", inst.State.Status, out.types, tc.status, tc.sent)
				}
			})
		}
	})
}
