package verify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/subscription"
)

// Handled is one event a consumer's handler got.
type Handled struct {
	ID       uuid.UUID
	Position varve.Position
	// By is the subscription that handed it over: a delivery segment's
	// name ([subscription.SegmentName]); empty for the projection.
	By string
}

// Consumed is what one consumer's handler got, in the order it got it.
type Consumed struct {
	Consumer string // "delivery" or "projection"
	Filter   varve.Filter
	// Name is the consumer's name; a delivery's segments are named
	// subscription.SegmentName(Name, i, Segments) when Segments > 1.
	Name     string
	Segments int
	Handled  []Handled
	// Overflow: the handler got more than the recorder keeps; the rest
	// was not recorded, and the consumer is not checked.
	Overflow bool
	// Behind says why the consumer had not handled the run's events
	// through the end of $all when it was stopped; empty when it had.
	Behind string
	// Restarts counts the times its Run returned an error (a server away)
	// and it was started again from its checkpoint.
	Restarts int
	// Runs counts a delivery's dispatchers started: one per segment, and
	// one more each time a segment changed hands or restarted.
	Runs int
}

// Defaults and bounds of the consumers.
const (
	// DefaultLeaseTTL is the default of Config.LeaseTTL.
	DefaultLeaseTTL = subscription.DefaultLeaseTTL
	// MaxDeliverySegments bounds Config.DeliverySegments: each segment
	// reads the run's part of the log once.
	MaxDeliverySegments = 64
	// maxHandled bounds the events a consumer's recorder keeps (each a
	// fixed 56 bytes or so, ~230 MB at most): a run that handles more is
	// not checked, and says so.
	maxHandled = 1 << 22
	// holders run the delivery's segments in this process, as two
	// processes would: segments move between them when the second joins.
	holders = 2
	// consumerWait bounds the wait, after the writers stopped, for the
	// consumers to handle the log through its end.
	consumerWait = time.Minute
)

// consumer is a running consumer: its recorder, and how to wait for it.
type consumer struct {
	mu   sync.Mutex
	c    Consumed
	got  int // events handed to the handler, recorded or not
	skip int // tests: the skip-th event got is not recorded
	err  error
	wait func(ctx context.Context, pos varve.Position) error
}

func (c *consumer) record(e *varve.RecordedEvent, by string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got++
	switch {
	case c.got == c.skip:
	case len(c.c.Handled) >= maxHandled:
		c.c.Overflow = true
	default:
		c.c.Handled = append(c.c.Handled, Handled{ID: e.ID, Position: e.Position, By: by})
	}
}

// keep runs run until ctx ends, again after each error (a pause between).
func (c *consumer) keep(ctx context.Context, run func(context.Context) error) {
	for ctx.Err() == nil {
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("returned before it was stopped")
		}
		c.mu.Lock()
		c.c.Restarts++
		c.err = err
		c.mu.Unlock()
		pause(ctx, 100*time.Millisecond)
	}
}

// caughtUp waits until the consumer has handled the log through pos, or
// ctx ends; then it records why not.
func (c *consumer) caughtUp(ctx context.Context, pos varve.Position) {
	if err := c.wait(ctx, pos); err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.c.Behind = fmt.Sprintf("not through %v when stopped: %v", pos, err)
		if c.err != nil {
			c.c.Behind += fmt.Sprintf(" (its last error: %v)", c.err)
		}
	}
}

// deliveryLacks says what the store lacks for a segmented delivery; ""
// when it has it all.
func deliveryLacks(s *varve.Store) string {
	caps := s.Capabilities()
	switch {
	case !caps.Leases:
		return "the store keeps no leases"
	case !caps.Checkpoints:
		return "the store keeps no checkpoints"
	case !caps.ListCheckpoints:
		return "the store does not list checkpoints (waiting for every segment needs it)"
	}
	return ""
}

// startDelivery starts a delivery of f's events split into cfg's
// segments under leases, held by two holders of this process, each
// segment a dispatcher to an in-process handler.
func startDelivery(ctx context.Context, wg *sync.WaitGroup, s *varve.Store, cfg Config, f varve.Filter) *consumer {
	name := "verify" + cfg.Run + "-delivery"
	c := &consumer{skip: cfg.skip, c: Consumed{Consumer: "delivery", Filter: f, Name: name, Segments: cfg.DeliverySegments}}
	c.wait = func(ctx context.Context, pos varve.Position) error { return subscription.WaitFor(ctx, s, name, pos) }
	sink := delivery.SinkFunc(func(_ context.Context, d delivery.Delivery) error {
		c.record(&d.Event, d.Subscription)
		return nil
	})
	for h := range holders {
		sc := subscription.Config{Name: name, Filter: f, Lease: subscription.Lease{
			Holder: name + "-" + strconv.Itoa(h), TTL: cfg.LeaseTTL, Segments: cfg.DeliverySegments}}
		wg.Go(func() {
			c.keep(ctx, func(ctx context.Context) error {
				return subscription.RunWith(ctx, s, sc, func(ctx context.Context, sub *subscription.Subscription) error {
					c.mu.Lock()
					c.c.Runs++
					c.mu.Unlock()
					d, err := delivery.New(sub, sink, delivery.Config{Concurrency: 4, CheckpointInterval: 50 * time.Millisecond})
					if err != nil {
						return err
					}
					return d.Run(ctx)
				})
			})
		})
	}
	return c
}

// startProjection starts a projection of f's events whose checkpoint is
// kept in memory: a save that cannot fail, so that each event is applied
// exactly once (a checkpoint in the store whose save fails hands the
// batch over again, as the projection's at-least-once contract allows).
func startProjection(ctx context.Context, wg *sync.WaitGroup, s *varve.Store, cfg Config, f varve.Filter) (*consumer, error) {
	name := "verify" + cfg.Run
	c := &consumer{skip: cfg.skip, c: Consumed{Consumer: "projection", Filter: f, Name: projection.CheckpointName(name, 1)}}
	r, err := projection.NewRunner(s, projection.Projection{Name: name, Version: 1, Filter: f,
		Handle: func(_ context.Context, b projection.Batch) error {
			for i := range b.Events {
				c.record(&b.Events[i], "")
			}
			return nil
		}}, projection.Config{Checkpoints: subscription.NewMemoryCheckpoints(), ControlPoll: -1, Heartbeat: -1})
	if err != nil {
		return nil, fmt.Errorf("verify: projection: %w", err)
	}
	c.wait = r.WaitFor
	wg.Go(func() { c.keep(ctx, r.Run) })
	return c, nil
}

// checkConsumed checks what a consumer got against want, the events of
// its filter in $all: the delivery must have handed over each at least
// once, each stream's in version order (again only after it went on);
// the projection must have applied each exactly once, in $all's order.
func checkConsumed(c *Consumed, want []varve.RecordedEvent, r *Result, bad func(string, ...any)) {
	what := c.Consumer
	r.ConsumerRestarts += c.Restarts
	switch what {
	case "delivery":
		r.Delivered += len(c.Handled)
		r.DeliveryRuns += c.Runs
	case "projection":
		r.Projected += len(c.Handled)
	}
	if c.Behind != "" {
		bad("%s: %s", what, c.Behind)
	}
	if c.Overflow {
		bad("%s: handled more than the %d events the checker keeps: not checked", what, maxHandled)
		return
	}
	at := make(map[uuid.UUID]int, len(want))
	for i, e := range want {
		at[e.ID] = i
	}
	if what == "projection" {
		seen := make(map[uuid.UUID]bool, len(c.Handled))
		for i, h := range c.Handled {
			switch {
			case seen[h.ID]:
				bad("projection: applied %s at %v twice (its event %d)", h.ID, h.Position, i)
			case i >= len(want):
				bad("projection: its event %d is %s at %v, not one of its filter's in $all at the end", i, h.ID, h.Position)
			case want[i].ID != h.ID:
				bad("projection: its event %d is %s at %v, $all has %s at %v there (skipped or reordered)", i, h.ID, h.Position, want[i].ID, want[i].Position)
			default:
				seen[h.ID] = true
				continue
			}
			return
		}
		if len(c.Handled) < len(want) {
			bad("projection: applied %d of the %d events of its filter in $all", len(c.Handled), len(want))
		}
		return
	}
	high := map[string]varve.Version{} // each stream's highest version handed over
	done := make([]bool, len(want))
	for _, h := range c.Handled {
		i, ok := at[h.ID]
		if !ok {
			bad("delivery: %s handed over %s at %v, not one of its filter's in $all at the end", h.By, h.ID, h.Position)
			continue
		}
		e := &want[i]
		if c.Segments > 1 {
			if seg := subscription.SegmentName(c.Name, subscription.SegmentOf(e.Stream, c.Segments), c.Segments); h.By != seg {
				bad("delivery: %s handed over %s@%d, which belongs to %s", h.By, e.Stream, e.Version, seg)
			}
		}
		done[i] = true
		switch v := e.Version; {
		case v <= high[e.Stream]:
			r.Redelivered++
		case v == high[e.Stream]+1:
			high[e.Stream] = v
		default:
			bad("delivery: %s handed over %s@%d at %v after version %d (skipped or reordered)", h.By, e.Stream, v, e.Position, high[e.Stream])
			high[e.Stream] = v
		}
	}
	missing, first := 0, -1
	for i, ok := range done {
		if !ok {
			missing++
			if first < 0 {
				first = i
			}
		}
	}
	if missing > 0 {
		e := &want[first]
		bad("delivery: %d of the %d events of its filter in $all never handed over, the first %s@%d at %v", missing, len(want), e.Stream, e.Version, e.Position)
	}
}
