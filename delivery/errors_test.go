package delivery_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/subscription"
)

// TestErrorContext: each error of a dispatcher or of its parked store names
// the subscription and the stream the store already named once, and stays
// errors.Is-able to the cause.
func TestErrorContext(t *testing.T) {
	t.Parallel()
	const name = "hooks-err"
	ctx := context.Background()
	setup := func(t *testing.T) (*varve.Store, *delivery.Dispatcher) {
		s := newStore(t)
		if _, err := s.Append(ctx, "order-1", varve.NoStream, varve.Event{Type: "T"}); err != nil {
			t.Fatal(err)
		}
		sub, err := subscription.Open(ctx, s, subscription.Config{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		d, err := delivery.New(sub, delivery.SinkFunc(func(context.Context, delivery.Delivery) error { return nil }), delivery.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return s, d
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) error
	}{
		{"start on a closed store", func(t *testing.T) error {
			s, d := setup(t)
			s.Close()
			return d.Run(ctx)
		}},
		{"store closed while running", func(t *testing.T) error {
			s, d := setup(t)
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx) }()
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := d.WaitFor(wctx, varve.Position{Seq: 1}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			return <-done
		}},
		{"list on a closed store", func(t *testing.T) error {
			s, d := setup(t)
			s.Close()
			_, err := d.Parked().List(ctx)
			return err
		}},
		{"park on a closed store", func(t *testing.T) error {
			s, d := setup(t)
			s.Close()
			_, err := d.Parked().Park(ctx, delivery.ParkedEvent{Subscription: name, Stream: "order-1", Version: 1})
			return err
		}},
		{"skip on a closed store", func(t *testing.T) error {
			s, d := setup(t)
			if _, err := d.Parked().Park(ctx, delivery.ParkedEvent{Subscription: name, Stream: "order-1", Version: 1, Position: varve.Position{Seq: 1}}); err != nil {
				t.Fatal(err)
			}
			list, err := d.Parked().List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			return d.Parked().Resolve(ctx, "skipped", list[0].Position)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.run(t)
			if !errors.Is(err, varve.ErrClosed) {
				t.Fatalf("error %v, want ErrClosed", err)
			}
			for line := range strings.Lines(err.Error()) { // one per joined error
				if n := strings.Count(line, name); n != 1 {
					t.Errorf("%q names the subscription %d times, want once", line, n)
				}
				if n := strings.Count(line, "delivery"); n != 1 {
					t.Errorf("%q says delivery %d times, want once", line, n)
				}
			}
		})
	}
}
