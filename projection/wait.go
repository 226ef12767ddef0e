package projection

import (
	"context"
	"fmt"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/backoff"
	"github.com/varve-go/varve/subscription"
)

// WaitFor waits until the runner has applied the global log through pos:
// its checkpoint is at or after pos, so its read model holds every event
// up to pos that the projection reads (a runner of one segment: of its
// segment). Give it an append's [varve.AppendResult.Position] to read your
// own writes from the read model. A runner split under a lease
// (Config.Lease.Segments) waits for every segment, whichever process holds
// it, through the store's checkpoints. It is bounded by ctx only; a runner
// that is not running makes it wait.
func (r *Runner) WaitFor(ctx context.Context, pos varve.Position) error {
	if r.cfg.Lease.Segments > 1 {
		if err := subscription.WaitFor(ctx, r.store, CheckpointName(r.p.Name, r.p.Version), pos); err != nil {
			return fmt.Errorf("projection %q: %w", r.p.Name, err)
		}
		return nil
	}
	for {
		moved := r.moved.Wait()
		r.mu.Lock()
		at := r.st.Position
		r.mu.Unlock()
		if !at.Less(pos) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("projection %q: wait for position %s (applied through %s): %w", r.p.Name, pos, at, ctx.Err())
		case <-moved:
		}
	}
}

// WaitFor waits until the version to serve of the projection name
// ([Current]) has applied the global log through pos, in whichever process
// runs it: read your own writes from its read model across processes. It
// polls the store's checkpoints, waits for a version to serve when there is
// none yet, and is bounded by ctx only.
func WaitFor(ctx context.Context, store *varve.Store, name string, pos varve.Position) error {
	v, ok, err := Current(ctx, store, name)
	for err == nil && !ok {
		if err = backoff.Sleep(ctx, 100*time.Millisecond); err == nil {
			v, ok, err = Current(ctx, store, name)
		}
	}
	if err != nil {
		return fmt.Errorf("projection %q: wait for position %s: %w", name, pos, err)
	}
	if err := subscription.WaitFor(ctx, store, CheckpointName(name, v), pos); err != nil {
		return fmt.Errorf("projection %q version %d: %w", name, v, err)
	}
	return nil
}
