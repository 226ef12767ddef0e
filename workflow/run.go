package workflow

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// DefaultTick is the default of [RunConfig.Tick].
const DefaultTick = time.Second

// RunConfig configures [Runner.Run].
type RunConfig struct {
	// Name names the consumer: its checkpoints, and its leases after
	// subscription.LeasePrefix, as a subscription's. Default "workflow-"
	// and the workflow's name.
	Name string
	// Filter keeps the events Run reads as inputs (Route still decides
	// which are); the zero Filter reads every event.
	Filter varve.Filter
	// Lease runs the workflow across processes: with a Holder, in one of
	// those that run it with the same Name at a time; with Segments more
	// than 1, split into that many segments by the instance stream
	// (subscription.SegmentOf of [Runner.Stream]), each run by one process
	// at a time. The zero Lease runs it here alone.
	Lease subscription.Lease
	// Tick is how often due timers are fired and unsent commands relayed;
	// a timer fires at most a Tick after it is due. Default [DefaultTick].
	Tick time.Duration
	// OnError, when set, hears the errors Run goes past: an input or timer
	// whose instance failed (recorded as its last error, see [Inspect]),
	// and a send that failed (retried at the next Tick).
	OnError func(error)
}

// Run runs the workflow until ctx ends. It reads inputs after its
// checkpoint (the subscription Name, Filter) and applies each one routed
// to an instance of its own as [Runner.Handle] does, then relays that
// instance's commands; each Tick it fires the due timers of its instances
// and relays their unsent commands, and applies the operators' retry
// requests. A Decide that fails is recorded and Run goes on; a store error
// ends Run (the checkpoint is saved before the input that failed, and a
// new Run goes on from it).
//
// Under a Lease, each segment (one, without Segments) runs in one process
// at a time with its checkpoint fenced by its lease, and follows only the
// instances of its segment: their inputs, timers and commands. A holder
// paused past its lease cannot apply an input, or fire a timer, twice:
// every step is one append at the instance's expected version with ids
// derived from the input, so the late append of the paused holder is
// refused or deduplicated; a command may be sent twice with the same id.
// Run returns nil when ctx ends.
func (r *Runner[S]) Run(ctx context.Context, cfg RunConfig) error {
	var err error
	if cfg.Lease, err = cfg.Lease.WithDefaults(); err != nil {
		return fmt.Errorf("workflow %s: run: %w", r.def.Name, err)
	}
	if cfg.Tick < 0 {
		return fmt.Errorf("workflow %s: run: %w: tick %s", r.def.Name, varve.ErrInvalidArgument, cfg.Tick)
	}
	if cfg.Tick == 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Name == "" {
		cfg.Name = "workflow-" + r.def.Name
	}
	if r.sender == nil {
		return fmt.Errorf("workflow %s: run: %w: no Sender", r.def.Name, ErrInvalidDefinition)
	}
	l := cfg.Lease
	switch {
	case l.Holder == "":
		err = r.runSegment(ctx, cfg, 0, 1, nil)
	case l.Segments > 1:
		err = subscription.HoldSegments(ctx, r.store, subscription.LeasePrefix+cfg.Name, l.Holder, l.Segments, l.TTL,
			func(ctx context.Context, i int, cps varve.CheckpointStore) error {
				return r.runSegment(ctx, cfg, i, l.Segments, cps)
			})
	default:
		err = subscription.Hold(ctx, r.store, subscription.LeasePrefix+cfg.Name, l.Holder, l.TTL,
			func(ctx context.Context, cps varve.CheckpointStore) error { return r.runSegment(ctx, cfg, 0, 1, cps) })
	}
	if err != nil {
		return fmt.Errorf("workflow %s: run: %w", r.def.Name, err)
	}
	return nil
}

// runSegment runs segment i of count, its checkpoint in cps (nil: the
// store's own).
func (r *Runner[S]) runSegment(ctx context.Context, cfg RunConfig, i, count int, cps varve.CheckpointStore) error {
	name := cfg.Name
	var mine func(string) bool
	if count > 1 {
		name = subscription.SegmentName(cfg.Name, i, count)
		mine = func(stream string) bool { return subscription.SegmentOf(stream, count) == i }
	}
	sub, err := subscription.Open(ctx, r.store, subscription.Config{Name: name, Filter: cfg.Filter, Checkpoints: cps})
	if err != nil {
		return err
	}
	e := r.newEngine(mine, true)
	e.onError = cfg.OnError
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return sub.Run(gctx, func(ctx context.Context, ev varve.RecordedEvent) error { return e.input(ctx, ev) })
	})
	g.Go(func() error { return e.tick(gctx, cfg.Tick) })
	return g.Wait()
}

// input applies an input event routed to an instance of the segment and
// relays the instance's commands.
func (e *engine[S]) input(ctx context.Context, ev varve.RecordedEvent) error {
	r := e.r
	if _, ok := r.ownRecord(&ev, TypeRetryRequested); ok {
		return nil // the tick applies it
	}
	id, ok := r.def.Route(&ev)
	if !ok || e.mine != nil && !e.mine(r.Stream(id)) {
		return nil
	}
	_, err := r.apply(ctx, id, Input{ID: ev.ID, Type: ev.Type, Data: ev.Data}, time.Time{})
	if ofInstances(err) {
		e.report(err)
		return nil
	}
	if err != nil {
		return err
	}
	e.send(ctx, r.Stream(id))
	return nil
}

// tick fires due timers, applies retry requests and relays unsent
// commands every d until ctx ends.
func (e *engine[S]) tick(ctx context.Context, d time.Duration) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if _, err := e.fireDue(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !ofInstances(err) {
				return err
			}
			e.report(err)
		}
		if err := e.relayUnsent(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
