package projection

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// LeasePrefix begins the name of the lease of a projection version that
// runs single-active: "projection:" and its checkpoint's name.
const LeasePrefix = "projection:"

// runActive runs the version in one process at a time, of all that run it
// with a lease of the same version (see [Config.Lease]).
func (r *Runner) runActive(ctx context.Context) error {
	lease := LeasePrefix + CheckpointName(r.p.Name, r.p.Version)
	err := subscription.Hold(ctx, r.store, lease, r.cfg.Lease.Holder, r.cfg.Lease.TTL, func(ctx context.Context, cps varve.CheckpointStore) error {
		r.cps = cps // runHere is not running: Hold calls this on its own goroutine, one call at a time
		return r.runHere(ctx)
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

// runSegmented runs the version split into Lease.Segments segments spread
// over the processes that run it (see [Config.Lease]); each segment this
// process holds gets a runner of its own.
func (r *Runner) runSegmented(ctx context.Context) error {
	count := r.cfg.Lease.Segments
	lease := LeasePrefix + CheckpointName(r.p.Name, r.p.Version)
	err := subscription.HoldSegments(ctx, r.store, lease, r.cfg.Lease.Holder, count, r.cfg.Lease.TTL, func(ctx context.Context, i int, cps varve.CheckpointStore) error {
		cfg := r.cfg
		cfg.Segment, cfg.Segments, cfg.Checkpoints, cfg.Lease = i, count, cps, subscription.Lease{}
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
// process holds when it runs segmented ([Config.Lease]), by segment.
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
// a version run segmented ([Config.Lease]).
func SegmentHolders(ctx context.Context, store *varve.Store, name string, version, count int) (members []string, segments []subscription.SegmentHolder, err error) {
	cp := CheckpointName(name, version)
	members, segments, err = subscription.HeldSegments(ctx, store, LeasePrefix+cp, cp, count)
	if err != nil {
		return nil, nil, fmt.Errorf("projection %q: segment holders: %w", name, err)
	}
	return members, segments, nil
}
