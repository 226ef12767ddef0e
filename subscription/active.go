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

// RunActive runs the subscription in one process at a time, of all that
// run it with the same name, calling h as [Subscription.Run] does: it is
// [Active] with [Subscription.Run] as the work.
func RunActive(ctx context.Context, store *varve.Store, cfg Config, holder string, ttl time.Duration, h Handler) error {
	return Active(ctx, store, cfg, holder, ttl, func(ctx context.Context, sub *Subscription) error { return sub.Run(ctx, h) })
}

// Active runs work on the subscription in one process at a time, of all
// that run it with the same name: it waits until holder holds the
// subscription's lease, opens the subscription from its checkpoint, and
// calls work with it (a [Subscription.Run], or a delivery dispatcher over
// it). It renews the lease every third of ttl, and every checkpoint saved
// through the subscription is fenced by the lease's token, so a process
// that paused past its lease and came back cannot move the checkpoint of
// the one that took over. When the lease is lost, the context of work
// ends and Active waits for the lease again; another holder takes over
// within ttl of the last renewal of a process that died. It returns nil
// when ctx ends, after releasing the lease, and the error of work
// otherwise.
//
// The store's backend must keep leases and checkpoints; cfg.Checkpoints
// must be nil.
func Active(ctx context.Context, store *varve.Store, cfg Config, holder string, ttl time.Duration, work func(context.Context, *Subscription) error) error {
	if cfg.Checkpoints != nil {
		return fmt.Errorf("subscription %q: active: cfg.Checkpoints must be nil (the lease fences the store's own): %w", cfg.Name, varve.ErrNotSupported)
	}
	err := Hold(ctx, store, LeasePrefix+cfg.Name, holder, ttl, func(ctx context.Context, cps varve.CheckpointStore) error {
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
// of work otherwise. [Active] is Hold over a subscription; package
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
