package subscription

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/varve-go/varve"
)

// LeasePrefix begins the name of the lease of a subscription that runs
// single-active: "subscription:" and the subscription's name.
const LeasePrefix = "subscription:"

// Lease runs a consumer across processes under leases: in one process at
// a time of all that run it with the same name (single-active), or split
// into Segments segments spread over them. The zero Lease runs the
// consumer here alone, without leases.
type Lease struct {
	// Holder names this process among those that run the consumer;
	// setting it runs the consumer under leases.
	Holder string
	// TTL is how long a lease lasts without a renewal; it is renewed every
	// third of it, and another holder takes over within TTL of the last
	// renewal of a process that died. Default [DefaultLeaseTTL]; between
	// varve.MinLeaseTTL and varve.MaxLeaseTTL.
	TTL time.Duration
	// Segments, when more than 1, splits the consumer into this many
	// segments by the hash of the stream id ([SegmentOf]), each with a
	// lease and checkpoint of its own, spread over the processes that run
	// it with the same name and Segments; at most [MaxSegments].
	Segments int
}

// DefaultLeaseTTL is the default of [Lease.TTL].
const DefaultLeaseTTL = 10 * time.Second

// WithDefaults returns l with its default TTL when it has a holder. It
// fails with varve.ErrInvalidArgument for a TTL or segments without a
// holder, a TTL out of bounds, or segments out of 0..MaxSegments.
func (l Lease) WithDefaults() (Lease, error) {
	if l.Holder == "" {
		if l.TTL != 0 || l.Segments != 0 {
			return l, fmt.Errorf("%w: a lease's TTL or segments without a holder", varve.ErrInvalidArgument)
		}
		return l, nil
	}
	if l.TTL == 0 {
		l.TTL = DefaultLeaseTTL
	}
	if l.TTL < varve.MinLeaseTTL || l.TTL > varve.MaxLeaseTTL {
		return l, fmt.Errorf("%w: lease ttl %s", varve.ErrInvalidArgument, l.TTL)
	}
	if l.Segments < 0 || l.Segments > MaxSegments {
		return l, fmt.Errorf("%w: %d segments (at most %d)", varve.ErrInvalidArgument, l.Segments, MaxSegments)
	}
	return l, nil
}

// Run opens the subscription and calls h for its events as
// [Subscription.Run] does, under leases when cfg.Lease has a holder (see
// [RunWith]).
func Run(ctx context.Context, store *varve.Store, cfg Config, h Handler) error {
	return RunWith(ctx, store, cfg, func(ctx context.Context, sub *Subscription) error { return sub.Run(ctx, h) })
}

// RunWith opens the subscription and calls work with it (a
// [Subscription.Run], or a delivery dispatcher over it). With a zero
// cfg.Lease it opens it here and calls work once.
//
// With cfg.Lease.Holder set and at most 1 segment, the subscription runs
// in one process at a time, of all that run it with the same name: RunWith
// waits until the holder holds the subscription's lease, opens the
// subscription from its checkpoint, and calls work with it. It renews the
// lease every third of its TTL, and every checkpoint saved through the
// subscription is fenced by the lease's token, so a process that paused
// past its lease and came back cannot move the checkpoint of the one that
// took over. When the lease is lost, the context of work ends and RunWith
// waits for the lease again.
//
// With cfg.Lease.Segments more than 1, the subscription is split into that
// many segments by the hash of the stream id ([SegmentOf]) across the
// processes that run it with the same name and count: each segment has its
// own lease, checkpoint and subscription (with [Config.Segment] and
// [Config.Segments] set, and the segment's name, [SegmentName]), and runs
// in exactly one of them at a time, with work called for it. Each process
// holds a membership lease of its own and takes its share of the segments:
// of n members in holder order, the first count%n hold count/n+1 segments
// and the others count/n. Every third of the TTL a process renews its
// leases, releases segments beyond its share (stopping their work first,
// so their last checkpoint is saved before another process starts from
// it), and takes free segments up to its share. When a process dies, its
// leases expire within the TTL of its last renewal and the others take its
// segments within another third of it; when one joins, the others hand it
// segments within a third of the TTL. A segment's new holder starts from
// the checkpoint its last holder saved, and a holder that paused past its
// lease cannot move that checkpoint (it is fenced), so each stream's
// events are handled in order by each holder, and an event is handled
// again only by a new holder after a hand-over or fail-over (the events
// after the last saved checkpoint). Each segment reads the whole log
// through its filter and keeps its own streams: count segments read it
// count times.
//
// Under leases, RunWith returns nil when ctx ends, after stopping its work
// and releasing its leases, and otherwise the first error of work; the
// store's backend must keep leases and checkpoints, cfg.Checkpoints must
// be nil, and a segmented subscription reads $all (no cfg.Stream, no
// cfg.Segments of its own).
func RunWith(ctx context.Context, store *varve.Store, cfg Config, work func(context.Context, *Subscription) error) error {
	var err error
	if cfg.Lease, err = cfg.Lease.WithDefaults(); err != nil {
		return fmt.Errorf("subscription %q: %w", cfg.Name, err)
	}
	switch {
	case cfg.Lease.Holder == "":
		sub, err := Open(ctx, store, cfg)
		if err != nil {
			return err
		}
		return work(ctx, sub)
	case cfg.Lease.Segments > 1:
		return segmented(ctx, store, cfg, work)
	}
	return active(ctx, store, cfg, work)
}

func active(ctx context.Context, store *varve.Store, cfg Config, work func(context.Context, *Subscription) error) error {
	if cfg.Checkpoints != nil {
		return fmt.Errorf("subscription %q: active: cfg.Checkpoints must be nil (the lease fences the store's own): %w", cfg.Name, varve.ErrNotSupported)
	}
	lease := cfg.Lease
	cfg.Lease = Lease{}
	err := Hold(ctx, store, LeasePrefix+cfg.Name, lease.Holder, lease.TTL, func(ctx context.Context, cps varve.CheckpointStore) error {
		cfg := cfg
		cfg.Checkpoints = cps
		sub, err := Open(ctx, store, cfg)
		if err != nil {
			return err
		}
		return work(ctx, sub)
	})
	if err != nil {
		return fmt.Errorf("subscription %q: active: %w", cfg.Name, err)
	}
	return nil
}

// Hold runs work in one process at a time, of all that hold the lease
// named lease: it waits until holder holds it, then calls work with a
// checkpoint store over the store's own whose saves are fenced by the
// lease's token (refused with [varve.ErrLeaseLost] once a newer holder
// took it). It renews the lease every third of ttl; when the lease is
// lost (a renewal fails or finds a new term, or a fenced save is
// refused), the context of work ends and Hold waits for the lease again.
// It returns nil when ctx ends, after releasing the lease, and the error
// of work otherwise. [RunWith] runs a single-active subscription with Hold; package
// projection runs a projection's runner with it.
func Hold(ctx context.Context, store *varve.Store, lease, holder string, ttl time.Duration, work func(context.Context, varve.CheckpointStore) error) error {
	if store == nil || !store.Capabilities().Leases || !store.Capabilities().Checkpoints {
		return fmt.Errorf("hold lease %q: the store must keep leases and checkpoints: %w", lease, varve.ErrNotSupported)
	}
	leases := store.Leases()
	every := ttl / 3
	for {
		l, err := acquire(ctx, leases, lease, holder, ttl, every)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		lost, err := runHolding(ctx, store, l, ttl, every, work)
		if lost {
			continue
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runSaveTimeout)
		rerr := leases.Release(rctx, l)
		cancel()
		if err == nil && ctx.Err() != nil {
			return nil
		}
		return errors.Join(err, rerr)
	}
}

// acquire waits until holder holds the lease, trying every interval.
func acquire(ctx context.Context, leases varve.Leases, name, holder string, ttl, every time.Duration) (varve.Lease, error) {
	for {
		lease, err := leases.Acquire(ctx, name, holder, ttl)
		if err == nil || !errors.Is(err, varve.ErrLeaseHeld) {
			return lease, err
		}
		if err := sleep(ctx, nil, every); err != nil {
			return varve.Lease{}, err
		}
	}
}

// runHolding runs work while the lease is held; lost reports that it ended
// because the lease was lost.
func runHolding(ctx context.Context, store *varve.Store, lease varve.Lease, ttl, every time.Duration, work func(context.Context, varve.CheckpointStore) error) (lost bool, err error) {
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	fenced := &fencedCheckpoints{leases: store.Leases(), cps: store.Checkpoints(), lease: lease}
	var renewed sync.WaitGroup
	renewed.Go(func() {
		for sleep(hctx, nil, every) == nil {
			l, err := fenced.leases.Acquire(hctx, lease.Name, lease.Holder, ttl)
			if err != nil {
				if hctx.Err() == nil {
					fenced.lose()
					stop()
				}
				return
			}
			fenced.renew(l)
		}
	})
	err = work(hctx, fenced)
	stop()
	renewed.Wait()
	if fenced.isLost() || errors.Is(err, varve.ErrLeaseLost) {
		return true, nil
	}
	return false, err
}

// fencedCheckpoints saves a subscription's checkpoint fenced by its
// lease, and remembers when the lease was lost.
type fencedCheckpoints struct {
	leases varve.Leases
	cps    varve.Checkpoints
	mu     sync.Mutex
	lease  varve.Lease
	lost   bool
}

func (f *fencedCheckpoints) renew(l varve.Lease) {
	f.mu.Lock()
	if l.Token != f.lease.Token {
		f.lost = true // a new term: someone may have held it in between
	}
	f.lease = l
	f.mu.Unlock()
}

func (f *fencedCheckpoints) lose() {
	f.mu.Lock()
	f.lost = true
	f.mu.Unlock()
}

func (f *fencedCheckpoints) isLost() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}

func (f *fencedCheckpoints) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	f.mu.Lock()
	lease, lost := f.lease, f.lost
	f.mu.Unlock()
	if lost {
		return varve.ErrLeaseLost
	}
	err := f.leases.SaveCheckpoint(ctx, name, pos, lease)
	if errors.Is(err, varve.ErrLeaseLost) {
		f.lose()
	}
	return err
}

func (f *fencedCheckpoints) LoadCheckpoint(ctx context.Context, name string) (varve.Position, bool, error) {
	return f.cps.Load(ctx, name)
}
