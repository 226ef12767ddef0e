package server_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/server"
	"github.com/varve-go/varve/subscription"
)

// TestReadYourWrites: an append answers its position in Varve-Position;
// reads of a stream, of $all, of a projection and of a consumer that name
// it as min_position answer once it is reached (the projection's read
// model and the consumer have the event by then), and 504
// position_not_reached when it is not within wait; on every backend.
func TestReadYourWrites(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		ctx := t.Context()
		a := serve(t, store, server.Config{Writes: true})
		applied := make(chan varve.Position, 100)
		r, err := projection.NewRunner(store, projection.Projection{Name: "orders", Version: 1, Filter: varve.Filter{Categories: []string{"order"}},
			Handle: func(_ context.Context, b projection.Batch) error {
				for _, e := range b.Events {
					applied <- e.Position
				}
				return nil
			}}, projection.Config{Promote: true, MinPoll: time.Millisecond, MaxPoll: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 2)
		go func() { done <- r.Run(rctx) }()
		go func() {
			done <- subscription.Run(rctx, store, subscription.Config{Name: "mailer", MaxPoll: 20 * time.Millisecond},
				func(context.Context, varve.RecordedEvent) error { return nil })
		}()
		defer func() {
			stop()
			for range 2 {
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("run: %v", err)
				}
			}
		}()

		res := a.want(a.do("POST", "/api/v1/streams/order-1/events", map[string]any{"expected_version": "no-stream",
			"events": []map[string]any{{"type": "Placed", "data": map[string]int{"n": 1}}}}), 201, "append")
		pos := res.header.Get("Varve-Position")
		want, err := varve.ParsePosition(pos)
		if err != nil || pos != res.body["position"] {
			t.Fatalf("the append's Varve-Position is %q, its body's position %v", pos, res.body["position"])
		}
		at := "min_position=" + url.QueryEscape(pos) + "&wait=30s"
		a.want(a.do("GET", "/api/v1/streams/order-1?"+at, nil), 200, "stream info at the append's position")
		a.want(a.do("GET", "/api/v1/streams/order-1/events?"+at, nil), 200, "stream events at the append's position")
		page := a.want(a.do("GET", "/api/v1/all?limit=1000&"+at, nil), 200, "$all at the append's position")
		if evs := page.body["events"].([]any); len(evs) == 0 || evs[len(evs)-1].(map[string]any)["position"] != pos {
			t.Fatalf("$all read at min_position %s ends at %v", pos, evs)
		}
		a.want(a.do("GET", "/api/v1/projections/orders?"+at, nil), 200, "the projection at the append's position")
		select {
		case got := <-applied:
			if got.String() != pos {
				t.Fatalf("the read model applied %s, want %s", got, pos)
			}
		default:
			t.Fatalf("the projection answered at min_position %s before its read model applied it", pos)
		}
		sub := a.want(a.do("GET", "/api/v1/subscriptions/mailer?"+at, nil), 200, "the consumer at the append's position")
		cp, _ := sub.body["subscription"].(map[string]any)["checkpoint"].(string)
		if got, err := varve.ParsePosition(cp); err != nil || got.Less(want) {
			t.Fatalf("the consumer's checkpoint at min_position %s is %q", pos, cp)
		}

		far := "min_position=999999999:1&wait=50ms"
		for _, path := range []string{"/api/v1/all?", "/api/v1/streams/order-1/events?", "/api/v1/projections/orders?", "/api/v1/subscriptions/mailer?"} {
			r := a.want(a.do("GET", path+far, nil), 504, path+far)
			if r.errCode() != "position_not_reached" {
				t.Fatalf("%s: code %q", path+far, r.errCode())
			}
		}
		for _, bad := range []string{"wait=1s", "min_position=x", "min_position=1&wait=0s", "min_position=1&wait=2m", "min_position=1&wait=soon"} {
			a.want(a.do("GET", "/api/v1/streams/order-1?"+bad, nil), 400, "stream info with "+bad)
		}
	})
}
