package projection

import (
	"context"
	"fmt"
	"time"

	"github.com/varve-go/varve"
)

// followControl reads the control stream, at most once a ControlPoll
// unless now, and follows its requests: pause, resume, replays of parked
// events, rebuild.
func (r *Runner) followControl(ctx context.Context, now bool) error {
	if r.cfg.ControlPoll < 0 || !now && time.Since(r.ctrlAt) < r.cfg.ControlPoll {
		return nil
	}
	r.ctrlAt = time.Now()
	c, err := ReadControl(ctx, r.store, r.p.Name)
	if err != nil {
		return err
	}
	r.failed = c.Failure != nil && c.Failure.Version == r.p.Version
	switch {
	case c.Paused && !r.extPaused:
		r.extPaused = true
		r.Pause()
	case !c.Paused && r.extPaused:
		r.extPaused = false
		r.Resume()
	}
	if rp := c.Replays[r.checkpointName()]; rp != nil && rp.Pending && rp.Request > r.replayed && !r.isPaused() {
		if err := r.replayParked(ctx, *rp); err != nil {
			return err
		}
	}
	req, ok := c.Rebuilds[r.p.Version]
	if !ok || req <= r.rebuilt {
		return nil
	}
	done, _, err := r.cps.LoadCheckpoint(ctx, rebuiltName(r.p.Name, r.p.Version))
	if err != nil {
		return fmt.Errorf("projection %q: %w", r.p.Name, err)
	}
	if r.rebuilt = varve.Version(done.Seq); req <= r.rebuilt {
		return nil
	}
	return r.rebuild(ctx, req)
}

// rebuild carries out rebuild request req: Reset, then the checkpoint
// back to the start and the origin at the head, then the record that req
// is done. A crash on the way leaves req undone, to be carried out again:
// Reset must be idempotent.
func (r *Runner) rebuild(ctx context.Context, req varve.Version) error {
	if r.cfg.Segments > 1 {
		r.rebuilt = req
		r.set(func(s *Status) {
			s.LastError = fmt.Sprintf("rebuild of version %d requested, but a segmented runner does not rebuild in place", r.p.Version)
		})
		return nil
	}
	if r.p.Reset == nil {
		r.rebuilt = req
		r.set(func(s *Status) {
			s.LastError = fmt.Sprintf("rebuild of version %d requested, but the projection has no Reset", r.p.Version)
		})
		return nil
	}
	r.rebuilding = true
	r.set(func(s *Status) { s.State = Rebuilding })
	if err := r.p.Reset(ctx, r.p.Version); err != nil {
		return fmt.Errorf("projection %q: rebuild: reset: %w", r.p.Name, err)
	}
	head, err := r.store.LastPosition(ctx)
	if err != nil {
		return fmt.Errorf("projection %q: rebuild: %w", r.p.Name, err)
	}
	for _, cp := range []struct {
		name string
		pos  varve.Position
	}{
		{CheckpointName(r.p.Name, r.p.Version), varve.Start},
		{originName(r.p.Name, r.p.Version), head},
		{rebuiltName(r.p.Name, r.p.Version), varve.Position{Seq: uint64(req)}},
	} {
		if err := r.cps.SaveCheckpoint(ctx, cp.name, cp.pos); err != nil {
			return fmt.Errorf("projection %q: rebuild: %w", r.p.Name, err)
		}
	}
	r.rebuilt = req
	r.set(func(s *Status) { s.Position, s.Lag = varve.Start, lag(varve.Start, s.Head) })
	return errRestart
}

// recordFailure appends the error that ended Run to the control stream.
func (r *Runner) recordFailure(ctx context.Context, cause error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := control(cctx, r.store, r.p.Name, failedType, controlRecord{Version: r.p.Version, Error: cause.Error()}); err == nil {
		r.failed = true
	}
}
