package projection

import (
	"context"
	"fmt"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// LeasePrefix begins the name of the lease of a projection version that
// runs single-active: "projection:" and its checkpoint's name.
const LeasePrefix = "projection:"

// RunActive runs the projection's version in one process at a time, of
// all that run it with RunActive: it waits until holder holds the
// version's lease, then runs as [Runner.Run] does, renewing the lease
// every third of ttl, with every checkpoint the runner saves fenced by
// the lease's token. When the lease is lost, the run stops and RunActive
// waits for the lease again; another holder takes over within ttl of the
// last renewal of a process that died, from the last checkpoint saved. A
// projection with a CommitFunc saves its checkpoint in its own
// transaction, which is not fenced: it stays exactly once with two
// holders, as it does with two runners. RunActive returns nil when ctx
// ends, after releasing the lease, and otherwise the error of a run.
//
// The store's backend must keep leases and checkpoints, and the runner's
// Config.Checkpoints must be nil.
func (r *Runner) RunActive(ctx context.Context, holder string, ttl time.Duration) error {
	if r.cfg.Checkpoints != nil {
		return fmt.Errorf("projection %q: run active: Config.Checkpoints must be nil: %w", r.p.Name, varve.ErrNotSupported)
	}
	lease := LeasePrefix + CheckpointName(r.p.Name, r.p.Version)
	err := subscription.Hold(ctx, r.store, lease, holder, ttl, func(ctx context.Context, cps varve.CheckpointStore) error {
		r.cps = cps // Run is not running: Hold calls this on its own goroutine, one call at a time
		return r.Run(ctx)
	})
	if err != nil {
		return fmt.Errorf("projection %q: run active: %w", r.p.Name, err)
	}
	return nil
}
