package projection

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
)

// The control stream's records of replays of parked events: an operator's
// request, and what the runner that parked the events did with it.
const (
	replayType   = "projection.replay"
	replayedType = "projection.replayed"
)

// MaxReplaySelection bounds the streams, and the positions, that one
// [ReplayParked] request selects.
const MaxReplaySelection = 1000

// ReplayParked asks the runner that parked events under subscription (a
// version's [CheckpointName], or the name of one of its segments) to
// apply them again through the projection's handler: those of the given
// streams and at the given positions (all of them when both are empty),
// each stream in version order. An event the handler takes is resolved as
// replayed, as [delivery.Parked.Replay] resolves a delivered one; a
// stream stops at its first event that still fails after the runner's
// retries, and it and the stream's later events stay parked. The runner
// carries the request out between batches, within its
// [Config.ControlPoll] (a runner started later, when it starts; a paused
// one, when it resumes), and records what it did ([Control.Replays]).
// Requests not yet carried out add up. A replay is at-least-once, also
// with a CommitFunc: a crash between the handler's commit and the
// event's resolution applies the event again at the next request.
//
// It returns the version of the control stream that holds the request.
func ReplayParked(ctx context.Context, store *varve.Store, subscription string, streams []string, positions []varve.Position) (varve.Version, error) {
	name, version, ok := ParseCheckpointName(subscription)
	if !ok {
		return 0, fmt.Errorf("%w: %q is not the name of a projection's checkpoint", varve.ErrInvalidArgument, subscription)
	}
	if len(streams) > MaxReplaySelection || len(positions) > MaxReplaySelection {
		return 0, fmt.Errorf("%w: projection %q: a replay selects at most %d streams and %d positions", varve.ErrInvalidArgument, name, MaxReplaySelection, MaxReplaySelection)
	}
	for _, s := range streams {
		if err := varve.CheckStreamID(s); err != nil {
			return 0, err
		}
	}
	return appendControl(ctx, store, name, replayType, controlRecord{Version: version, Subscription: subscription, Streams: streams, Positions: positions})
}

// ParseCheckpointName returns the projection and the version of the
// checkpoint cp: [CheckpointName], the name of one of its segments, or
// that of a version's origin or rebuild record.
func ParseCheckpointName(cp string) (name string, version int, ok bool) {
	if i := strings.Index(cp, "/segment/"); i >= 0 {
		cp = cp[:i]
	}
	return parseCheckpointName(cp)
}

// Bookkeeping reports whether the checkpoint cp is one of a projection's
// records beside its checkpoints (a version's origin, the last rebuild it
// carried out): no consumer's position, which tools do not list as one.
func Bookkeeping(cp string) bool {
	_, _, ok := parseCheckpointName(cp)
	return ok && (strings.HasSuffix(cp, "-origin") || strings.HasSuffix(cp, "-rebuilt"))
}

// Replay is what a projection's control stream says of the replays of the
// events parked under one name.
type Replay struct {
	// Request is the control stream's version of the latest request.
	Request varve.Version `json:"request"`
	// Pending is set while requests wait for the runner; All, Streams and
	// Positions are what they select together (All: every parked event).
	Pending   bool             `json:"pending"`
	All       bool             `json:"all"`
	Streams   []string         `json:"streams"`
	Positions []varve.Position `json:"positions"`
	// Replayed and Failed count the events of the last replay carried out
	// that the handler took, and that stay parked (the first failure of
	// each stream and the events held behind it); Error is the first
	// failure's error.
	Replayed int       `json:"replayed"`
	Failed   int       `json:"failed"`
	Error    string    `json:"error,omitempty"`
	At       time.Time `json:"at"`
}

// add folds a request into the pending selection.
func (rp *Replay) add(req varve.Version, r controlRecord) {
	if !rp.Pending {
		rp.All, rp.Streams, rp.Positions = false, nil, nil
	}
	rp.Request, rp.Pending, rp.At = req, true, r.At
	if len(r.Streams) == 0 && len(r.Positions) == 0 {
		rp.All = true
	}
	for _, s := range r.Streams {
		if !slices.Contains(rp.Streams, s) {
			rp.Streams = append(rp.Streams, s)
		}
	}
	for _, p := range r.Positions {
		if !slices.Contains(rp.Positions, p) {
			rp.Positions = append(rp.Positions, p)
		}
	}
}

// done records the outcome of a replay carried out.
func (rp *Replay) done(r controlRecord) {
	if r.Request >= rp.Request {
		rp.Pending = false
	}
	rp.Replayed, rp.Failed, rp.Error, rp.At = r.Replayed, r.Failed, r.Error, r.At
}

func (rp *Replay) match(pe delivery.ParkedEvent) bool {
	if rp.All {
		return true
	}
	return slices.Contains(rp.Streams, pe.Stream) || slices.Contains(rp.Positions, pe.Position)
}

// replayParked carries out the pending replay rp: the parked events it
// selects go through the handler as one-event batches, with the runner's
// retries, at the checkpoint.
func (r *Runner) replayParked(ctx context.Context, rp Replay) error {
	name := r.checkpointName()
	through, _, err := r.cps.LoadCheckpoint(ctx, name)
	if err != nil {
		return fmt.Errorf("projection %q: replay parked events: %w", r.p.Name, err)
	}
	apply := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		return r.attempts(ctx, Batch{Events: []varve.RecordedEvent{d.Event}, Through: through, Version: r.p.Version, Parked: true})
	})
	res, err := delivery.NewParked(r.store, name).Replay(ctx, apply, rp.match)
	if err != nil {
		return fmt.Errorf("projection %q: %w", r.p.Name, err)
	}
	out := controlRecord{Version: r.p.Version, Subscription: name, Request: rp.Request, Replayed: len(res.Delivered), Failed: len(res.Failed) + res.Held}
	if len(res.Failed) > 0 {
		f := res.Failed[0]
		out.Error = fmt.Sprintf("%s@%d: %v", f.Event.Stream, f.Event.Version, f.Err)
		if len(out.Error) > maxParkedError {
			out.Error = strings.ToValidUTF8(out.Error[:maxParkedError], "")
		}
	}
	if _, err := appendControl(ctx, r.store, r.p.Name, replayedType, out); err != nil {
		return err
	}
	r.replayed = rp.Request
	return nil
}
