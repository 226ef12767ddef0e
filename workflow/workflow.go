// Package workflow runs durable workflows (process managers): an instance's
// state, inbox, outbox and timers are events in one stream per instance.
//
// Contract:
//   - [Runner.Handle] takes an input event (use it as a subscription
//     handler). It loads the instance stream, skips the input if its inbox
//     record is already there, calls Decide, and appends the inbox record,
//     the new state events, the outbox commands and the timer schedules and
//     cancels in ONE append with the expected version. All ids are derived
//     from the instance stream and the input id, so a redelivered input, a
//     retry after a crash, or a competing process cannot apply it twice.
//   - [Runner.Relay] sends the unsent commands of an instance through the
//     [Sender], then records each as sent. Sending is at-least-once; every
//     [Command] carries a deterministic id, so an idempotent receiver sees
//     each command's effect once.
//   - [Runner.FireDue] fires every scheduled, uncancelled, unfired timer
//     whose due time is at or before the [Clock]'s now, as an input with a
//     deterministic id: two processes, or a holder paused past its turn,
//     fire it once. Its timer index is in memory and bounded by
//     [Config.TimerIndexCount] and [Config.TimerIndexBytes]: past either it
//     keeps the earliest-due timers and, once the first timer it let go
//     falls due, re-reads the timer records of $all for those at or after
//     it; the index itself is rebuilt from $all by each new Runner.
//
// [Runner.Run] runs all of it as a consumer: inputs after a checkpoint
// through a subscription, and each [RunConfig.Tick] the due timers, the
// operators' retry requests and the commands not yet sent, found in one
// read of the workflow's own records in $all. Under a
// subscription.Lease it runs in one process at a time, or split into
// segments by instance stream, each segment in one process at a time with
// its checkpoint fenced by its lease; a holder paused past its lease
// cannot apply a step twice (its late append is refused or deduplicated),
// and may send a command again under the same id.
//
// [Inspect], [List], [Retry] and [Cancel] are the operator's view and
// actions (varve workflows): a Decide that fails is recorded as the
// instance's last error; a retry request is applied by Handle when its
// subscription reads the workflow's own category, and by Run; a cancelled
// instance takes no input and relays no command.
//
// The timer index and the set of instances with unsent commands are held
// in memory within [Config]'s budgets and rebuilt from $all by each new
// Runner and Run. See docs/workflows.md.
package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// Record types the engine writes into an instance stream.
const (
	TypeInbox       = "workflow.inbox"
	TypeOutbox      = "workflow.outbox"
	TypeSent        = "workflow.sent"
	TypeTimer       = "workflow.timer"
	TypeTimerCancel = "workflow.timer-cancelled"
)

// ErrInvalidDefinition is returned for a Definition missing a part.
var ErrInvalidDefinition = errors.New("workflow: invalid definition")

// instanceError is an error of one instance (its records, or Decide), not
// of the store: FireDue goes on with the other timers.
type instanceError struct{ error }

func (e instanceError) Unwrap() error { return e.error }

// ofInstances reports whether err is of instances alone: an instanceError,
// or errors that wrap or join only instanceErrors. A join that holds a store
// error as well is not: Run ends on it.
func ofInstances(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case instanceError:
		return true
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if !ofInstances(x) {
				return false
			}
		}
		return len(e.Unwrap()) > 0
	}
	return ofInstances(errors.Unwrap(err))
}

// ns is the namespace of the engine's deterministic (UUIDv5) ids.
var ns = uuid.MustParse("6f1d7c52-3b57-4c47-9a43-5a0f8d0e7c11")

// Input is what Decide sees: an input event, or a fired timer (Timer set).
type Input struct {
	ID    uuid.UUID
	Type  string
	Data  []byte
	Timer string
}

// Command is a command the workflow emits. ID is deterministic: the same
// instance and input always produce the same id.
type Command struct {
	ID       uuid.UUID `json:"id"`
	Instance string    `json:"instance"`
	Type     string    `json:"type"`
	Data     []byte    `json:"data,omitempty"`
}

// Sender delivers commands; it should deduplicate by Command.ID.
type Sender interface {
	Send(ctx context.Context, c Command) error
}

// Timer schedules input Timer=ID at Due.
type Timer struct {
	ID  string    `json:"id"`
	Due time.Time `json:"due"`
}

// Decision is what Decide returns for one input.
type Decision struct {
	Events   []varve.Event // state events; their ids are replaced
	Commands []Command     // Type and Data; ID and Instance are set by the engine
	Timers   []Timer
	Cancel   []string // timer ids
}

// Clock tells the time; tests pass their own.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Definition describes a workflow over state S.
type Definition[S any] struct {
	// Name is the category of instance streams: Name, the store's category
	// separator, and the instance id ("order-42").
	Name string
	// Route maps an input event to an instance id; ok false ignores it.
	Route func(e *varve.RecordedEvent) (id string, ok bool)
	// Evolve folds a state event into the state.
	Evolve func(s S, e *varve.RecordedEvent) S
	// Decide reacts to an input given the state.
	Decide func(s S, in Input) (Decision, error)
}

// Runner runs a Definition against a store.
type Runner[S any] struct {
	store  *varve.Store
	def    Definition[S]
	sender Sender
	clock  Clock

	// beforeAppend, set by tests, runs after Decide and before the append.
	beforeAppend func(ctx context.Context, stream string, in Input)

	cfg  Config
	fire *engine[S] // FireDue's
}

// Defaults of [Config].
const (
	DefaultTimerIndexCount = 100_000
	DefaultTimerIndexBytes = 16 << 20
)

// Config tunes a Runner; zero fields take the defaults.
type Config struct {
	// Clock tells FireDue the time; nil is the system clock.
	Clock Clock
	// TimerIndexCount and TimerIndexBytes bound the pending timers FireDue
	// keeps in memory (defaults [DefaultTimerIndexCount] and
	// [DefaultTimerIndexBytes]; an entry counts its stream and timer id
	// plus about 190 bytes). One timer is kept whatever its size.
	TimerIndexCount int
	TimerIndexBytes int64
}

// NewRunner returns a runner with the default [Config] and clock; a nil
// clock is the system clock.
func NewRunner[S any](store *varve.Store, def Definition[S], sender Sender, clock Clock) (*Runner[S], error) {
	return NewRunnerConfig(store, def, sender, Config{Clock: clock})
}

// NewRunnerConfig returns a runner configured by cfg.
func NewRunnerConfig[S any](store *varve.Store, def Definition[S], sender Sender, cfg Config) (*Runner[S], error) {
	if def.Name == "" || def.Route == nil || def.Evolve == nil || def.Decide == nil {
		return nil, fmt.Errorf("%w: name, Route, Evolve and Decide are required", ErrInvalidDefinition)
	}
	if cfg.TimerIndexCount < 0 || cfg.TimerIndexBytes < 0 {
		return nil, fmt.Errorf("%w: negative timer index budget", varve.ErrInvalidArgument)
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.TimerIndexCount == 0 {
		cfg.TimerIndexCount = DefaultTimerIndexCount
	}
	if cfg.TimerIndexBytes == 0 {
		cfg.TimerIndexBytes = DefaultTimerIndexBytes
	}
	r := &Runner[S]{store: store, def: def, sender: sender, clock: cfg.Clock, cfg: cfg}
	r.fire = r.newEngine(nil, false)
	return r, nil
}

// Stream returns the stream of instance id.
func (r *Runner[S]) Stream(id string) string { return InstanceStream(r.store, r.def.Name, id) }

// InstanceStream is the stream of instance id of the workflow name on
// store: the name, the store's category separator and the id, so that the
// workflow's instances are the category name.
func InstanceStream(store *varve.Store, name, id string) string {
	return name + store.Config().CategorySeparator + id
}

type inboxRec struct {
	Input uuid.UUID `json:"input"`
	Type  string    `json:"type"`
	Data  []byte    `json:"data,omitempty"`
	Timer string    `json:"timer,omitempty"`
	// Attempt is random per append attempt; only reports use it.
	Attempt uuid.UUID `json:"attempt"`
}

type outboxRec struct {
	ID   uuid.UUID `json:"id"`
	Type string    `json:"type"`
	Data []byte    `json:"data,omitempty"`
}

type timerRec struct {
	ID  string    `json:"id"`
	Due time.Time `json:"due,omitzero"`
}

// Instance is the loaded view of an instance stream.
type Instance[S any] struct {
	State   S
	Version varve.Version
	Inputs  map[uuid.UUID]bool
	Unsent  []Command
	Pending map[string]time.Time // scheduled timers neither cancelled nor fired
	// Cancelled is set by an operator's Cancel: the instance takes no input.
	Cancelled bool
	// failed holds the inputs that failed and are not handled yet, and
	// retries the retry requests made of each.
	failed  map[uuid.UUID]failure
	retries map[uuid.UUID]int
}

// Load reads the instance stream of id.
func (r *Runner[S]) Load(ctx context.Context, id string) (*Instance[S], error) {
	stream := r.Stream(id)
	l := newLedger(stream)
	var state S
	for e, err := range r.store.ReadStream(ctx, stream) {
		if err != nil {
			if errors.Is(err, varve.ErrStreamNotFound) {
				break
			}
			return nil, fmt.Errorf("workflow: load %s: %w", stream, err)
		}
		engine, err := l.add(&e)
		if err != nil {
			return nil, instanceError{err}
		}
		if !engine {
			state = r.def.Evolve(state, &e)
		}
	}
	l.done()
	return &Instance[S]{State: state, Version: l.version, Inputs: l.inputs, Unsent: l.unsent(id), Pending: l.pending,
		Cancelled: l.cancelled, failed: l.failed, retries: l.retries}, nil
}

func derive(stream string, input uuid.UUID, part string) uuid.UUID {
	return uuid.NewSHA1(ns, []byte(stream+"\x00"+input.String()+"\x00"+part))
}

// Handle applies an input event to its instance (a subscription handler).
// An operator's retry request (Retry), read from the workflow's own
// category, applies the failed input it names again.
func (r *Runner[S]) Handle(ctx context.Context, e varve.RecordedEvent) error {
	if id, ok := r.ownRecord(&e, TypeRetryRequested); ok {
		return r.retry(ctx, id, e.Data)
	}
	id, ok := r.def.Route(&e)
	if !ok {
		return nil
	}
	_, err := r.apply(ctx, id, Input{ID: e.ID, Type: e.Type, Data: e.Data}, time.Time{})
	return err
}

// apply reports whether this call appended the input. A timer input is
// applied only if the instance has it pending and due at now.
func (r *Runner[S]) apply(ctx context.Context, id string, input Input, now time.Time) (bool, error) {
	stream := r.Stream(id)
	for attempt := 0; ; attempt++ {
		inst, err := r.Load(ctx, id)
		if err != nil {
			return false, err
		}
		if inst.Inputs[input.ID] || inst.Cancelled {
			return false, nil
		}
		if input.Timer != "" {
			if due, ok := inst.Pending[input.Timer]; !ok || due.After(now) {
				return false, nil // cancelled, fired, or rescheduled later
			}
		}
		d, err := r.def.Decide(inst.State, input)
		if err != nil {
			err = instanceError{fmt.Errorf("workflow: %s: decide %s: %w", stream, input.Type, err)}
			return false, r.recordFailure(ctx, stream, inst, input, err)
		}
		evs, err := r.records(stream, input, d)
		if err != nil {
			return false, instanceError{err}
		}
		if r.beforeAppend != nil {
			r.beforeAppend(ctx, stream, input)
		}
		res, err := r.store.Append(ctx, stream, varve.Exact(inst.Version), evs...)
		if err == nil {
			// An append of ids already committed returns that append's
			// result: the attempt nonce tells whether it was this one.
			return r.mine(ctx, stream, res.FirstVersion, evs[0].Data)
		}
		if errors.Is(err, varve.ErrDuplicateEvent) {
			return false, nil
		}
		if errors.Is(err, varve.ErrWrongExpectedVersion) && attempt < 100 {
			continue // someone else appended: reload, maybe it was this input
		}
		return false, fmt.Errorf("workflow: %s: append: %w", stream, err)
	}
}

// mine reports whether the inbox record at version v is the one in data.
func (r *Runner[S]) mine(ctx context.Context, stream string, v varve.Version, data []byte) (bool, error) {
	for e, err := range r.store.ReadStream(ctx, stream, varve.From(v), varve.Limit(1)) {
		if err != nil {
			return false, fmt.Errorf("workflow: %s: read back: %w", stream, err)
		}
		return string(e.Data) == string(data), nil
	}
	return false, fmt.Errorf("workflow: %s: read back: no event at %d", stream, v)
}

func (r *Runner[S]) records(stream string, input Input, d Decision) ([]varve.Event, error) {
	mk := func(part, typ string, v any) (varve.Event, error) {
		b, err := json.Marshal(v)
		return varve.Event{ID: derive(stream, input.ID, part), Type: typ, Data: b}, err
	}
	var evs []varve.Event
	ev, err := mk("in", TypeInbox, inboxRec{Input: input.ID, Type: input.Type, Data: input.Data, Timer: input.Timer, Attempt: uuid.New()})
	if err != nil {
		return nil, err
	}
	evs = append(evs, ev)
	for i, e := range d.Events {
		e.ID = derive(stream, input.ID, fmt.Sprintf("e%d", i))
		evs = append(evs, e)
	}
	for i, c := range d.Commands {
		cid := derive(stream, input.ID, fmt.Sprintf("c%d", i))
		ev, err := mk(fmt.Sprintf("o%d", i), TypeOutbox, outboxRec{ID: cid, Type: c.Type, Data: c.Data})
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	for i, t := range d.Timers {
		if t.ID == "" {
			return nil, fmt.Errorf("%w: timer without id", ErrInvalidDefinition)
		}
		ev, err := mk(fmt.Sprintf("t%d", i), TypeTimer, timerRec{ID: t.ID, Due: t.Due.UTC()})
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	for i, t := range d.Cancel {
		ev, err := mk(fmt.Sprintf("x%d", i), TypeTimerCancel, timerRec{ID: t})
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Relay sends the unsent commands of instance id and records each as sent.
// A crash after Send and before the record sends the command again with the
// same id.
func (r *Runner[S]) Relay(ctx context.Context, id string) (sent int, err error) {
	inst, err := r.Load(ctx, id)
	if err != nil {
		return 0, err
	}
	stream := r.Stream(id)
	for _, c := range inst.Unsent {
		if err := r.sender.Send(ctx, c); err != nil {
			return sent, fmt.Errorf("workflow: %s: send %s: %w", stream, c.ID, err)
		}
		b, _ := json.Marshal(outboxRec{ID: c.ID, Type: c.Type})
		ev := varve.Event{ID: uuid.NewSHA1(ns, []byte(stream+"\x00sent\x00"+c.ID.String())), Type: TypeSent, Data: b}
		if _, err := r.store.Append(ctx, stream, varve.Any, ev); err != nil && !errors.Is(err, varve.ErrDuplicateEvent) {
			return sent, fmt.Errorf("workflow: %s: record sent %s: %w", stream, c.ID, err)
		}
		sent++
	}
	return sent, nil
}
