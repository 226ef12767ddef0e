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

// checkpointName is the name of the runner's checkpoint: the version's,
// or its segment's.
func (r *Runner) checkpointName() string {
	cp := CheckpointName(r.p.Name, r.p.Version)
	if r.cfg.Segments > 1 {
		return subscription.SegmentName(cp, r.cfg.Segment, r.cfg.Segments)
	}
	return cp
}

// RunSegmented runs the projection's version split into count segments
// by the hash of the stream id across the processes that run it with
// RunSegmented and the same count, as subscription.Segmented spreads a
// subscription's: each segment has its own lease, checkpoint and runner
// (this runner's projection and Config with Segment and Segments set),
// and each stream's events are handled in order by one runner at a time.
// Segmented runners do not promote and do not rebuild in place (see
// [Config.Segments]); the segments' checkpoints are named after the
// version's checkpoint with "/segment/<i>-of-<count>". Status reports
// this runner, which runs nothing itself; [Runner.SegmentStatus] reports
// the runners of the segments this process holds. It returns nil when ctx
// ends, and otherwise the first error of a segment's run.
//
// The store's backend must keep leases and checkpoints, and the runner's
// Config.Checkpoints must be nil.
func (r *Runner) RunSegmented(ctx context.Context, holder string, count int, ttl time.Duration) error {
	if r.cfg.Checkpoints != nil || r.cfg.Promote || r.cfg.Segments > 1 {
		return fmt.Errorf("projection %q: run segmented: %w: Config.Checkpoints, Promote and Segments must be unset", r.p.Name, varve.ErrInvalidArgument)
	}
	lease := LeasePrefix + CheckpointName(r.p.Name, r.p.Version)
	err := subscription.HoldSegments(ctx, r.store, lease, holder, count, ttl, func(ctx context.Context, i int, cps varve.CheckpointStore) error {
		cfg := r.cfg
		cfg.Segment, cfg.Segments, cfg.Checkpoints = i, count, cps
		seg, err := NewRunner(r.store, r.p, cfg)
		if err != nil {
			return err
		}
		r.segMu.Lock()
		if r.segs == nil {
			r.segs = map[int]*Runner{}
		}
		r.segs[i] = seg
		r.segMu.Unlock()
		defer func() {
			r.segMu.Lock()
			delete(r.segs, i)
			r.segMu.Unlock()
		}()
		return seg.Run(ctx)
	})
	if err != nil {
		return fmt.Errorf("projection %q: run segmented: %w", r.p.Name, err)
	}
	return nil
}

// SegmentStatus returns the status of the runner of each segment that this
// process holds under [Runner.RunSegmented], by segment.
func (r *Runner) SegmentStatus() map[int]Status {
	r.segMu.Lock()
	defer r.segMu.Unlock()
	out := make(map[int]Status, len(r.segs))
	for i, seg := range r.segs {
		out[i] = seg.Status()
	}
	return out
}

// SegmentHolders says which processes run version of projection name
// segmented in count segments, in holder order, and who holds each
// segment with its checkpoint: the status across processes of
// [Runner.RunSegmented].
func SegmentHolders(ctx context.Context, store *varve.Store, name string, version, count int) (members []string, segments []subscription.SegmentHolder, err error) {
	cp := CheckpointName(name, version)
	members, segments, err = subscription.HeldSegments(ctx, store, LeasePrefix+cp, cp, count)
	if err != nil {
		return nil, nil, fmt.Errorf("projection %q: segment holders: %w", name, err)
	}
	return members, segments, nil
}
