// Package projection keeps read models up to date from the events of a
// store. A [Projection] has a name, a version, a [varve.Filter] and a
// handler over batches of events; a [Runner] runs it as a managed
// subscription: it catches up over the store's filtered reads of $all, then
// follows new events, in batches, and saves its checkpoint after each batch
// under a name derived from the projection's name and version.
//
// # Delivery guarantees
//
// With a [Handler], the checkpoint is saved after the handler returns: a
// crash between the two hands the batch to the handler again on restart.
// This is at-least-once, on every backend (memory, SQLite, PostgreSQL,
// NATS): handlers must be idempotent. With a [CommitFunc] the projection
// saves the checkpoint itself, in the transaction of its read-model writes;
// packages pgprojection (PostgreSQL) and sqliteprojection (SQLite) build
// one, which gives exactly-once read models.
//
// # Failures
//
// A handler error is retried with back-off. When a batch keeps failing its
// events are retried one at a time to find the poison event, which is
// parked as a delivery parks one ([Park]: listed and skipped with
// package delivery's Parked, `varve parked` and the console) or stops the
// projection ([Stop]), by configuration; an event is never skipped
// silently.
//
// # Versions and rebuilds
//
// Each version has its own checkpoint, so a new version builds from the
// beginning of the log (its Batches have Replaying set for the events that
// were in the log when it started) while the old one keeps serving. A
// runner with [Config.Promote] makes its version current ([SetCurrent])
// when it has caught up with the head of the log; readers ask [Current]
// which version's read model to serve. [Rebuild] asks a running version to
// rebuild in place instead: its Reset empties the read model, then it
// replays the log (with downtime of that read model).
//
// # Several processes
//
// With [Config.Lease] naming the process, [Runner.Run] runs a version in
// one process at a time of those that run it (a lease with fenced
// checkpoints; the others take over when it dies), or, with Lease.Segments,
// splits a version into segments by the hash
// of the stream id and spreads them over the processes, a runner per
// segment, moving segments when processes join or leave; each stream's
// events stay in order. Segmented runners do not promote or rebuild in
// place ([Config.Segments]).
//
// # Control and status in the store
//
// A runner's [Status] lives in its process. What outlives it is in the
// store: each version's checkpoint and origin (checkpoints named after
// [CheckpointName]), and the projection's control stream ([ControlStream],
// a system stream), which holds the current version, the requests of
// [Pause], [Resume] and [Rebuild], and the failures of runners (a Run that
// ended with an error, until the version reaches the head again). Runners
// read the control stream every [Config.ControlPoll] and follow it;
// [Inspect] and [List] read it, with the checkpoints and the parked
// events, for tools such as `varve projections`. Runners write to the
// store only on such events, never per batch, so that a projection's
// bookkeeping does not move the head of the log it follows.
package projection

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/shred"
)

// Batch is what a handler gets: events of the projection's filter in
// position order, and the position the projection has gone through once
// they are handled.
type Batch struct {
	Events []varve.RecordedEvent
	// Through is the position the projection's checkpoint moves to when the
	// batch is handled; it may be past the last event (events that did not
	// match were passed over).
	Through varve.Position
	// Replaying is true when every event of the batch was in the log before
	// this version of the projection first started: the handler is
	// rebuilding, and should not fire side effects (e-mails, webhooks).
	Replaying bool
	// Version is the projection's version, for handlers that pick their
	// target (a table per version) by it.
	Version int
	// Parked is set when the batch holds an event that the runner parked
	// and now applies again on an operator's request ([ReplayParked]): it
	// is behind the checkpoint, out of position order, and Through is the
	// checkpoint, which does not move. A CommitFunc applies such a batch
	// whatever its checkpoint says and leaves the checkpoint as it is
	// (packages pgprojection and sqliteprojection do).
	Parked bool

	// erased collects what the handler removed of erased subjects
	// (Erased); nil unless the projection takes Erasures.
	erased *[]shred.ReadModelErasure
}

// Erasures returns the erasure reports among the batch's events (those of
// package shred's ErasureStream), for a projection that takes Erasures.
func (b Batch) Erasures() []shred.Report {
	var out []shred.Report
	for i := range b.Events {
		if r, ok := shred.ParseErasure(b.Events[i]); ok {
			out = append(out, r)
		}
	}
	return out
}

// Erased tells the runner that the handler removed rows of the read model
// for erasure report r: once the batch is applied, the runner records it
// in the erasure's report ([shred.ReadModelErased]), at most once.
func (b Batch) Erased(r shred.Report, rows int64) {
	if b.erased != nil {
		*b.erased = append(*b.erased, shred.ReadModelErasure{Subject: r.Subject, Key: r.Key, Rows: rows})
	}
}

// Handler applies a batch to a read model. The runner saves the checkpoint
// after it returns nil (at-least-once).
type Handler func(ctx context.Context, b Batch) error

// CommitFunc applies a batch and saves checkpoint at b.Through in the same
// transaction, so that both commit or neither does (exactly-once). The
// checkpoint must be readable through the store's checkpoints
// ([varve.Store.Checkpoints]) under the name given.
type CommitFunc func(ctx context.Context, checkpoint string, b Batch) error

// Projection describes one version of a read model.
type Projection struct {
	// Name identifies the projection across versions.
	Name string
	// Version starts at 1; a new version rebuilds from the start of the log.
	Version int
	// Filter selects the events the handler sees.
	Filter varve.Filter
	// Query, when it has items, selects them instead: the events of a
	// dynamic consistency boundary (types and tags), read through the
	// backend's tag indexes ([subscription.Config].Query).
	Query varve.Query
	// Handle applies a batch; exactly one of Handle and Commit is set.
	Handle Handler
	// Commit applies a batch and saves the checkpoint itself.
	Commit CommitFunc
	// Erasures hands the handler, besides the events of Filter, the
	// erasure reports of package shred (the events of its system stream
	// ErasureStream), so that a read model that copied a subject's personal
	// data removes its rows in the batch that moves the checkpoint past
	// the erasure ([Batch.Erasures], [Batch.Erased]; packages pgprojection
	// and sqliteprojection have DeleteErased). It goes with Filter, not
	// with Query.
	Erasures bool
	// Reset empties the read model of version (say, DELETE FROM its table)
	// when a [Rebuild] is requested; it must be idempotent. Without it the
	// projection does not rebuild in place.
	Reset func(ctx context.Context, version int) error
}

// MaxNameLen bounds a projection's name, so that the names derived from it
// are valid checkpoint names and stream ids.
const MaxNameLen = 120

func (p Projection) check() error {
	if len(p.Name) == 0 || len(p.Name) > MaxNameLen {
		return fmt.Errorf("%w: projection name must be 1..%d bytes", varve.ErrInvalidArgument, MaxNameLen)
	}
	if err := varve.CheckName(p.Name); err != nil {
		return err
	}
	if p.Version < 1 {
		return fmt.Errorf("%w: projection %q: version %d, must be at least 1", varve.ErrInvalidArgument, p.Name, p.Version)
	}
	if (p.Handle == nil) == (p.Commit == nil) {
		return fmt.Errorf("%w: projection %q: set exactly one of Handle and Commit", varve.ErrInvalidArgument, p.Name)
	}
	if len(p.Query.Items) > 0 && !p.Filter.IsZero() {
		return fmt.Errorf("%w: projection %q: set one of Filter and Query", varve.ErrInvalidArgument, p.Name)
	}
	if len(p.Query.Items) > 0 && p.Erasures {
		return fmt.Errorf("%w: projection %q: Erasures goes with a Filter, not with a Query", varve.ErrInvalidArgument, p.Name)
	}
	return nil
}

// CheckpointName is the name of the checkpoint of version of projection
// name.
func CheckpointName(name string, version int) string {
	return "projection-" + name + "-v" + strconv.Itoa(version)
}

func originName(name string, version int) string { return CheckpointName(name, version) + "-origin" }

// ControlStream is the system stream that records the current version of
// projection name.
func ControlStream(name string) string { return varve.SystemPrefix + "projection-" + name }

// ErrApplied is returned by a [CommitFunc] that finds its checkpoint at or
// past the batch: the batch's writes are already committed with it (by an
// earlier attempt whose commit was acknowledged late, or by another runner).
// The runner counts the batch as handled.
var ErrApplied = errors.New("projection: batch already applied")

// ErrStopped is returned by [Runner.Run] when a poison event stopped the
// projection under the [Stop] policy.
var ErrStopped = errors.New("projection: stopped on a poison event")
