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
	"github.com/varve-go/varve/subscription"
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

// received deduplicates commands by id, as an idempotent receiver does.
type received struct {
	mu  sync.Mutex
	got map[string][]string // order id: command types in arrival order, each id once
	ids map[string]bool
}

func (r *received) Send(_ context.Context, c workflow.Command) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids[c.ID.String()] {
		return nil
	}
	r.ids[c.ID.String()] = true
	r.got[c.Instance] = append(r.got[c.Instance], c.Type)
	return nil
}

func (r *received) of(order string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.got[order]))
}

// TestOrderFulfilmentRun runs the workflow as two processes would, with
// Runner.Run split into segments under leases: half the orders are paid and
// shipped, the others time out and are compensated; each order gets its
// commands once.
func TestOrderFulfilmentRun(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		ctx, stop := context.WithCancel(context.Background())
		clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		recv := &received{got: map[string][]string{}, ids: map[string]bool{}}
		name := fmt.Sprintf("order%x", rand.Uint64())
		var wg sync.WaitGroup
		defer func() { stop(); wg.Wait() }()
		cfg := workflow.RunConfig{Filter: varve.Filter{Categories: []string{name + "src"}}, Tick: 20 * time.Millisecond,
			Lease: subscription.Lease{TTL: time.Second, Segments: 4}}
		for _, holder := range []string{"p1", "p2"} {
			r, err := workflow.NewRunner(store, Definition(name, clk), recv, clk)
			if err != nil {
				t.Fatal(err)
			}
			cfg := cfg
			cfg.Lease.Holder = holder
			wg.Go(func() {
				if err := r.Run(ctx, cfg); err != nil {
					t.Errorf("%s: %v", holder, err)
				}
			})
		}
		emit := func(order, typ string) {
			if _, err := store.Append(ctx, name+"src-"+order, varve.Any, varve.NewEvent(typ, []byte(order))); err != nil {
				t.Fatal(err)
			}
		}
		await := func(what string, cond func() bool) {
			deadline := time.Now().Add(time.Minute)
			for !cond() {
				if time.Now().After(deadline) {
					t.Fatalf("gave up waiting for %s", what)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		const n = 8
		orders := make([]string, n)
		for i := range orders {
			orders[i] = fmt.Sprintf("o%d", i)
			emit(orders[i], "OrderPlaced")
			emit(orders[i], "StockReserved")
		}
		await("payment asked of every order", func() bool {
			for _, o := range orders {
				if len(recv.of(o)) < 2 {
					return false
				}
			}
			return true
		})
		for _, o := range orders[:n/2] {
			emit(o, "PaymentTaken")
		}
		await("the paid orders shipping", func() bool {
			for _, o := range orders[:n/2] {
				if len(recv.of(o)) < 3 {
					return false
				}
			}
			return true
		})
		clk.add(PaymentTimeout)
		await("the unpaid orders compensated", func() bool {
			for _, o := range orders[n/2:] {
				if len(recv.of(o)) < 4 {
					return false
				}
			}
			return true
		})
		stop()
		wg.Wait()
		for i, o := range orders {
			want := []string{"Refund", "ReleaseStock", "ReserveStock", "TakePayment"}
			if i < n/2 {
				want = []string{"ReserveStock", "Ship", "TakePayment"}
			}
			if got := recv.of(o); !slices.Equal(got, want) {
				t.Errorf("%s: commands %v, want %v", o, got, want)
			}
		}
	})
}
