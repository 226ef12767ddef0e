package projection

import (
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// Policy says what a runner does with a poison event: one whose handling
// still fails after every retry.
type Policy uint8

const (
	// Stop stops the projection: Run returns an error wrapping ErrStopped
	// and the handler's error, and the state is Failed. The next Run tries
	// the event again. It is the default.
	Stop Policy = iota
	// Park parks the event with the error as a delivery parks one
	// ([delivery.Parked], under the name of the version's checkpoint, so
	// in "$parked-projection-<name>-v<version>"), then moves past it. The
	// operator's tools list and skip it as they do a delivery's.
	Park
)

// Defaults of a [Config].
const (
	DefaultMaxAttempts    = 5
	DefaultInitialBackoff = 10 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultJitter         = 0.5
)

// Config tunes a [Runner]. The zero Config is usable.
type Config struct {
	// PageSize is the most events of one batch; default the store's.
	PageSize int
	// Retry says how a failing batch, then each of its events, is tried
	// again before the event counts as poison; defaults: 5 attempts,
	// backoff from 10ms doubling to 5s, jitter 0.5.
	Retry subscription.RetryPolicy
	// Poison says what happens to a poison event.
	Poison Policy
	// Promote makes the projection's version current ([SetCurrent]) when
	// it first reaches the head of the log, unless that version or a later
	// one is current already: the switch-over of a rebuild.
	Promote bool
	// MinPoll and MaxPoll bound the polling of a live runner on backends
	// that cannot notify (see package subscription).
	MinPoll, MaxPoll time.Duration
	// LocalFilter reads every event of the log and filters in the process
	// instead of pushing the filter down to the backend's filtered reads.
	// It is slower for a sparse filter; tests use it as the reference.
	// [Inspect] then counts the version's lag over every event but system
	// streams' (the subscription it reads records no filter).
	LocalFilter bool
	// Checkpoints keeps the checkpoints; nil means the store's own, or
	// process memory on a backend without them. A projection with a
	// CommitFunc needs the store's own.
	Checkpoints varve.CheckpointStore
	// Segments, when more than 1, makes the runner handle only the events
	// of the streams in segment Segment (0..Segments-1, by
	// subscription.SegmentOf), with a checkpoint and an origin of its own;
	// a segmented run under a lease ([Config.Lease]) runs a runner per
	// segment held. A segmented
	// runner does not promote (Promote is refused) and does not rebuild in
	// place (a rebuild request is recorded as its LastError): one Reset per
	// segment would empty the whole read model.
	Segment, Segments int
	// Lease runs the version across processes under leases ([Runner.Run]):
	// with a Holder, in one process at a time of all that run it, each
	// checkpoint the runner saves fenced by the lease's token (another
	// holder takes over within the TTL of the last renewal of a process
	// that died, from the last checkpoint saved; a projection with a
	// CommitFunc saves its checkpoint in its own transaction, which is not
	// fenced: it stays exactly once with two holders, as it does with two
	// runners). With Segments more than 1, split into that many segments
	// by the hash of the stream id spread over the processes, as package
	// subscription spreads a subscription's: each segment has its own
	// lease, checkpoint (named after the version's with
	// "/segment/<i>-of-<count>") and runner, and each stream's events are
	// handled in order by one runner at a time; Status then reports this
	// runner, which runs nothing itself, and [Runner.SegmentStatus] the
	// runners of the segments this process holds. Under a lease the store
	// must keep leases and checkpoints, and Checkpoints must be nil; a
	// segmented version does not promote and has no Segments of its own.
	Lease subscription.Lease
	// ControlPoll is how often the runner reads the projection's control
	// stream for the requests of [Pause], [Resume] and [Rebuild] (what
	// `varve projections` writes); default 1s, negative to ignore them.
	// A runner also records there a Run that failed, and its recovery.
	ControlPoll time.Duration
	// Heartbeat is how often a running runner renews the lease that says
	// it runs ([subscription.Config.Heartbeat]); negative for none.
	Heartbeat time.Duration
}

// DefaultControlPoll is the default of [Config.ControlPoll].
const DefaultControlPoll = time.Second
