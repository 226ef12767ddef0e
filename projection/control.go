package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/subscription"
)

// The records of a projection's control stream ([ControlStream]) besides
// the current version: operators' requests, which running runners follow
// ([Config.ControlPoll]), and the failures of runners.
const (
	pausedType  = "projection.paused"
	resumedType = "projection.resumed"
	rebuildType = "projection.rebuild"
	failedType  = "projection.failed"
	// recoveredType clears a failure: the version's runner reached the
	// head again.
	recoveredType = "projection.recovered"
)

type controlRecord struct {
	Version int       `json:"version,omitempty"`
	Error   string    `json:"error,omitempty"`
	At      time.Time `json:"at"`
	// A replay's request and outcome ([ReplayParked]).
	Subscription string           `json:"subscription,omitempty"`
	Streams      []string         `json:"streams,omitempty"`
	Positions    []varve.Position `json:"positions,omitempty"`
	Request      varve.Version    `json:"request,omitempty"`
	Replayed     int              `json:"replayed,omitempty"`
	Failed       int              `json:"failed,omitempty"`
}

// Pause asks the runners of every version of projection name to stop
// handling after the batch in hand, until [Resume]. Runners see it within
// their [Config.ControlPoll]; a runner started later starts paused.
func Pause(ctx context.Context, store *varve.Store, name string) error {
	return control(ctx, store, name, pausedType, controlRecord{})
}

// Resume undoes [Pause].
func Resume(ctx context.Context, store *varve.Store, name string) error {
	return control(ctx, store, name, resumedType, controlRecord{})
}

// Rebuild asks the runner of version of projection name to rebuild its
// read model in place: it calls the projection's Reset, moves its
// checkpoint back to the start of the log and replays every event (with
// Batch.Replaying set). A projection without Reset does not rebuild and
// reports why in its status. To rebuild without downtime, run a new
// version beside the served one instead (see [Config.Promote]).
func Rebuild(ctx context.Context, store *varve.Store, name string, version int) error {
	if version < 1 {
		return fmt.Errorf("%w: projection %q: rebuild version %d, must be at least 1", varve.ErrInvalidArgument, name, version)
	}
	return control(ctx, store, name, rebuildType, controlRecord{Version: version})
}

func control(ctx context.Context, store *varve.Store, name, typ string, r controlRecord) error {
	_, err := appendControl(ctx, store, name, typ, r)
	return err
}

// appendControl appends r to the control stream of projection name and
// returns its version there.
func appendControl(ctx context.Context, store *varve.Store, name, typ string, r controlRecord) (varve.Version, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	r.At = time.Now().UTC()
	data, _ := json.Marshal(r)
	res, err := store.System().Append(ctx, ControlStream(name), varve.Any, varve.NewEvent(typ, data))
	if err != nil {
		return 0, fmt.Errorf("projection %q: %s: %w", name, strings.TrimPrefix(typ, "projection."), err)
	}
	return res.LastVersion, nil
}

func checkName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("%w: projection name must be 1..%d bytes", varve.ErrInvalidArgument, MaxNameLen)
	}
	return varve.CheckName(name)
}

// Control is what a projection's control stream holds.
type Control struct {
	// Current is the version to serve; 0 when none was made current.
	Current int
	// Paused is set by [Pause] and cleared by [Resume].
	Paused bool
	// Rebuilds maps a version to its latest rebuild request (the control
	// stream's version of the request).
	Rebuilds map[int]varve.Version
	// Failure is the last failure a runner recorded, nil when none.
	Failure *Failure
	// Replays maps the name that events are parked under (a version's
	// checkpoint or a segment's) to its replays ([ReplayParked]).
	Replays map[string]*Replay
}

// Failure is a runner's Run that ended with an error.
type Failure struct {
	Version int       `json:"version"`
	Error   string    `json:"error"`
	At      time.Time `json:"at"`
}

// ReadControl reads the control stream of projection name.
func ReadControl(ctx context.Context, store *varve.Store, name string) (Control, error) {
	c := Control{Rebuilds: map[int]varve.Version{}, Replays: map[string]*Replay{}}
	if err := checkName(name); err != nil {
		return c, err
	}
	for e, err := range store.ReadStream(ctx, ControlStream(name)) {
		if errors.Is(err, varve.ErrStreamNotFound) {
			return c, nil
		}
		if err != nil {
			return c, fmt.Errorf("projection %q: read control: %w", name, err)
		}
		var r controlRecord
		if err := json.Unmarshal(e.Data, &r); err != nil {
			return c, fmt.Errorf("projection %q: control event %d (%s): %w", name, e.Version, e.Type, err)
		}
		switch e.Type {
		case currentType:
			c.Current = r.Version
		case pausedType:
			c.Paused = true
		case resumedType:
			c.Paused = false
		case rebuildType:
			c.Rebuilds[r.Version] = e.Version
		case failedType:
			c.Failure = &Failure{Version: r.Version, Error: r.Error, At: r.At}
		case recoveredType:
			if c.Failure != nil && c.Failure.Version == r.Version {
				c.Failure = nil
			}
		case replayType, replayedType:
			rp := c.Replays[r.Subscription]
			if rp == nil {
				rp = &Replay{Streams: []string{}, Positions: []varve.Position{}}
				c.Replays[r.Subscription] = rp
			}
			if e.Type == replayType {
				rp.add(e.Version, r)
			} else {
				rp.done(r)
			}
		}
	}
	return c, nil
}

// rebuiltName is the checkpoint that records the last rebuild request a
// version carried out, as Position.Seq.
func rebuiltName(name string, version int) string { return CheckpointName(name, version) + "-rebuilt" }

// VersionInfo is what the store knows of one version of a projection.
type VersionInfo struct {
	Version int `json:"version"`
	// Checkpoint is where the version's read model is; nil when it never
	// saved one.
	Checkpoint *varve.Position `json:"checkpoint"`
	// Origin is the head of the log when the version first started: the
	// events up to it are a replay. Nil before the first start.
	Origin *varve.Position `json:"origin"`
	// Lag is the events after the checkpoint that the version reads (by
	// its filter, as its runner recorded it), counted up to [MaxInspectLag];
	// LagMore is set when there are more.
	Lag     int64 `json:"lag"`
	LagMore bool  `json:"lag_more"`
	// Pending is when the oldest event the version has yet to handle was
	// recorded (its lag in time); nil when it has none, or none within
	// subscription.OldestScan events.
	Pending *time.Time `json:"pending_since"`
	// Parked counts the version's parked events that are not replayed or
	// skipped, those of its segments' runners included where the backend
	// lists streams (a segment parks under its own name).
	Parked int `json:"parked"`
	// Running counts the processes that run the version now (its
	// segments' included), by their heartbeats ([subscription.Running]);
	// nil when the store keeps no leases.
	Running *int `json:"running"`
	// LastSeen is when a process last ran the version, as its runner's
	// heartbeats recorded it ([subscription.LastSeen]); nil when none did.
	LastSeen *time.Time `json:"last_seen"`
	// Current is set for the version to serve.
	Current bool `json:"current"`
	// RebuildPending is set when a rebuild was requested that the version's
	// runner has not carried out yet.
	RebuildPending bool `json:"rebuild_pending"`
	// ReplayPending is set when a replay of the version's parked events
	// (or of a segment's) was requested that its runner has not carried
	// out yet ([ReplayParked]).
	ReplayPending bool `json:"replay_pending"`
	// State is what the store's records say: "paused", "failed",
	// "rebuilding" (replaying the events up to its origin), "catching-up"
	// or "live" (at the head). Whether a runner is running, the store does
	// not know.
	State string `json:"state"`
}

// MaxInspectLag bounds the events [Inspect] counts behind a checkpoint.
const MaxInspectLag = 10_000

// countLag counts the events after cp that the version's runner reads
// (by the filter its subscription recorded: [subscription.Described]), up
// to MaxInspectLag, and finds when the oldest event it has yet to handle
// was recorded (nil: none).
func countLag(ctx context.Context, store *varve.Store, checkpoint string, cp varve.Position) (int64, bool, *time.Time, error) {
	d, ok, err := subscription.Described(ctx, store, checkpoint)
	if err != nil {
		return 0, false, nil, err
	}
	if !ok {
		d = subscription.Descriptor{}
	}
	n, more, err := subscription.Lag(ctx, store, cp, d, MaxInspectLag)
	if err != nil || n == 0 {
		return int64(n), more, nil, err
	}
	at, found, err := subscription.Oldest(ctx, store, cp, d)
	if err != nil || !found {
		return int64(n), more, nil, err
	}
	return int64(n), more, &at, nil
}

// Info is what the store knows of a projection: [Inspect] reads it.
type Info struct {
	Name     string         `json:"name"`
	Head     varve.Position `json:"head"`
	Paused   bool           `json:"paused"`
	Current  int            `json:"current"`
	Parked   int64          `json:"parked"`
	Failure  *Failure       `json:"failure"`
	Versions []VersionInfo  `json:"versions"`
}

// List returns the names of the projections of store: those with a
// checkpoint or a control stream, in byte order. It needs a backend that
// lists checkpoints or streams.
func List(ctx context.Context, store *varve.Store) ([]string, error) {
	seen := map[string]bool{}
	cps := store.Checkpoints()
	if store.Capabilities().ListCheckpoints {
		for q := (varve.ListQuery{Prefix: "projection-"}); ; {
			page, err := cps.List(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("projection: list checkpoints: %w", err)
			}
			for _, c := range page.Checkpoints {
				if name, _, ok := parseCheckpointName(c.Name); ok {
					seen[name] = true
				}
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
	}
	if streams := store.Streams(); store.Capabilities().ListStreams {
		prefix := ControlStream("")
		for q := (varve.ListQuery{Prefix: prefix}); ; {
			page, err := streams.List(ctx, q, true)
			if err != nil {
				return nil, fmt.Errorf("projection: list control streams: %w", err)
			}
			for _, s := range page.Streams {
				name := strings.TrimPrefix(s.Stream, prefix)
				if name != "" {
					seen[name] = true
				}
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
	} else if !store.Capabilities().ListCheckpoints {
		return nil, fmt.Errorf("projection: list: %w: the backend lists neither checkpoints nor streams", varve.ErrNotSupported)
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// parseCheckpointName splits "projection-<name>-v<version>", with or
// without the suffix of an origin or a rebuild record.
func parseCheckpointName(cp string) (name string, version int, ok bool) {
	rest, found := strings.CutPrefix(cp, "projection-")
	for _, suffix := range []string{"-origin", "-rebuilt"} {
		rest = strings.TrimSuffix(rest, suffix)
	}
	i := strings.LastIndex(rest, "-v")
	if !found || i <= 0 {
		return "", 0, false
	}
	v, err := strconv.Atoi(rest[i+2:])
	if err != nil || v < 1 || strconv.Itoa(v) != rest[i+2:] {
		return "", 0, false
	}
	return rest[:i], v, true
}

// Inspect returns what the store knows of projection name: its versions
// (those with a checkpoint or an origin, up to the current one), their
// checkpoints and lag, the control stream's requests and the events parked.
func Inspect(ctx context.Context, store *varve.Store, name string) (Info, error) {
	info := Info{Name: name, Versions: []VersionInfo{}}
	c, err := ReadControl(ctx, store, name)
	if err != nil {
		return info, err
	}
	info.Paused, info.Current, info.Failure = c.Paused, c.Current, c.Failure
	if info.Head, err = store.LastPosition(ctx); err != nil {
		return info, fmt.Errorf("projection %q: %w", name, err)
	}
	cps := store.Checkpoints()
	if !store.Capabilities().Checkpoints {
		return info, fmt.Errorf("projection %q: %w: the backend keeps no checkpoints", name, varve.ErrNotSupported)
	}
	versions, err := versionsOf(ctx, store, name, c)
	if err != nil {
		return info, err
	}
	for _, v := range versions {
		vi := VersionInfo{Version: v, Current: v == c.Current}
		load := func(cp string) (*varve.Position, error) {
			pos, ok, err := cps.Load(ctx, cp)
			if err != nil || !ok {
				return nil, err
			}
			return &pos, nil
		}
		if vi.Checkpoint, err = load(CheckpointName(name, v)); err == nil {
			vi.Origin, err = load(originName(name, v))
		}
		if err != nil {
			return info, fmt.Errorf("projection %q: %w", name, err)
		}
		if req, ok := c.Rebuilds[v]; ok {
			done, err := load(rebuiltName(name, v))
			if err != nil {
				return info, fmt.Errorf("projection %q: %w", name, err)
			}
			vi.RebuildPending = done == nil || done.Seq < uint64(req)
		}
		cp := varve.Start
		if vi.Checkpoint != nil {
			cp = *vi.Checkpoint
		}
		if vi.Lag, vi.LagMore, vi.Pending, err = countLag(ctx, store, CheckpointName(name, v), cp); err != nil {
			return info, fmt.Errorf("projection %q: lag: %w", name, err)
		}
		if at, ok, err := subscription.LastSeen(ctx, store, CheckpointName(name, v)); err != nil {
			return info, fmt.Errorf("projection %q: %w", name, err)
		} else if ok {
			vi.LastSeen = &at
		}
		if beats, err := store.Leases().List(ctx, subscription.HeartbeatPrefix+CheckpointName(name, v)+"/"); err == nil {
			n := len(beats)
			vi.Running = &n
		} else if !errors.Is(err, varve.ErrNotSupported) {
			return info, fmt.Errorf("projection %q: heartbeats: %w", name, err)
		}
		if vi.Parked, err = countParked(ctx, store, CheckpointName(name, v)); err != nil {
			return info, fmt.Errorf("projection %q: parked events: %w", name, err)
		}
		info.Parked += int64(vi.Parked)
		for sub, rp := range c.Replays {
			if n, ver, _ := ParseCheckpointName(sub); n == name && ver == v && rp.Pending {
				vi.ReplayPending = true
			}
		}
		switch {
		case c.Paused:
			vi.State = Paused.String()
		case c.Failure != nil && c.Failure.Version == v:
			vi.State = Failed.String()
		case vi.RebuildPending || vi.Origin != nil && cp.Less(*vi.Origin):
			vi.State = Rebuilding.String()
		case vi.Lag > 0:
			vi.State = CatchingUp.String()
		default:
			vi.State = Live.String()
		}
		info.Versions = append(info.Versions, vi)
	}
	return info, nil
}

// versionsOf returns the versions of projection name that have a
// checkpoint (where the backend lists them), a rebuild request or are
// current.
func versionsOf(ctx context.Context, store *varve.Store, name string, c Control) ([]int, error) {
	seen := map[int]bool{}
	if c.Current > 0 {
		seen[c.Current] = true
	}
	for v := range c.Rebuilds {
		seen[v] = true
	}
	cps := store.Checkpoints()
	if store.Capabilities().ListCheckpoints {
		for q := (varve.ListQuery{Prefix: "projection-" + name + "-v"}); ; {
			page, err := cps.List(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("projection %q: list checkpoints: %w", name, err)
			}
			for _, cp := range page.Checkpoints {
				if n, v, ok := parseCheckpointName(cp.Name); ok && n == name {
					seen[v] = true
				}
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
	} else {
		// Without a listing, versions from 1 up to the first one missing.
		for v := 1; ; v++ {
			_, ok, err := cps.Load(ctx, originName(name, v))
			if err != nil {
				return nil, fmt.Errorf("projection %q: %w", name, err)
			}
			if !ok {
				break
			}
			seen[v] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// countParked counts the unresolved parked events of checkpoint and, where
// the backend lists streams, of its segments.
func countParked(ctx context.Context, store *varve.Store, checkpoint string) (int, error) {
	names := []string{checkpoint}
	if store.Capabilities().ListStreams {
		prefix := delivery.ParkedStreamPrefix + checkpoint + "/segment/"
		for q := (varve.ListQuery{Prefix: prefix}); ; {
			page, err := store.Streams().List(ctx, q, true)
			if err != nil {
				return 0, err
			}
			for _, st := range page.Streams {
				names = append(names, strings.TrimPrefix(st.Stream, delivery.ParkedStreamPrefix))
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
	}
	n := 0
	for _, sub := range names {
		parked, err := delivery.NewParked(store, sub).List(ctx)
		if err != nil {
			return 0, err
		}
		n += len(parked)
	}
	return n, nil
}
