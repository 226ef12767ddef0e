package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// ParkedStreamPrefix starts the id of the stream that keeps a subscription's
// parked events: "$parked-<subscription>".
const ParkedStreamPrefix = "$parked-"

// Event types of the parked stream.
const (
	ParkedEventType   = "varve.parked"
	ResolvedEventType = "varve.resolved"
)

// Reasons for parking an event.
const (
	ReasonRejected     = "rejected"          // the sink failed it permanently
	ReasonExhausted    = "retries exhausted" // max attempts or max age
	ReasonStreamParked = "stream parked"     // an earlier event of its stream is parked
)

// ParkedEvent is an event that a dispatcher gave up on: the sink rejected
// it, its retries ran out, or (in per-stream order) an earlier event of its
// stream was parked. The event itself stays in the store; this is a
// reference to it, unless the dispatcher's [Source] keeps no store: then
// Event holds the event.
type ParkedEvent struct {
	Subscription string         `json:"subscription"`
	Stream       string         `json:"stream"`
	Version      varve.Version  `json:"version"`
	Position     varve.Position `json:"position"`
	EventID      uuid.UUID      `json:"event_id"`
	Type         string         `json:"type"`
	Attempts     int            `json:"attempts"`
	Reason       string         `json:"reason"`
	Error        string         `json:"error,omitempty"`
	FirstAttempt time.Time      `json:"first_attempt,omitzero"`
	ParkedAt     time.Time      `json:"parked_at"`
	// Event is the parked event itself, kept when its source has no store
	// to read it from again (NewFromSource); nil otherwise.
	Event *varve.RecordedEvent `json:"event,omitempty"`
}

type resolution struct {
	How       string           `json:"how"`
	Positions []varve.Position `json:"positions"`
	At        time.Time        `json:"at"`
}

// Parked is the durable dead-letter store of one subscription. It is kept in
// the event store itself, in the stream "$parked-<subscription>": a
// "varve.parked" event per parked event and a "varve.resolved" event per
// replay or skip, so it is as durable as the store on every backend and
// needs no capability of its own. Subscriptions skip "$" streams by
// default, so parked records are not delivered.
//
// Parked is safe for concurrent use, also by several processes: the state is
// the fold of the stream, in its order.
type Parked struct {
	store  *varve.Store
	sub    string
	stream string
}

// NewParked returns the parked store of a subscription.
func NewParked(store *varve.Store, subscription string) *Parked {
	return &Parked{store: store, sub: subscription, stream: ParkedStreamPrefix + subscription}
}

// Stream returns the id of the stream that keeps the parked events.
func (p *Parked) Stream() string { return p.stream }

// Park records events as parked and returns the version of the parked stream
// after the append.
func (p *Parked) Park(ctx context.Context, evs ...ParkedEvent) (varve.Version, error) {
	out := make([]varve.Event, len(evs))
	for i, pe := range evs {
		data, err := json.Marshal(pe)
		if err != nil {
			return 0, fmt.Errorf("delivery: park %s@%d: %w", pe.Stream, pe.Version, err)
		}
		out[i] = varve.Event{Type: ParkedEventType, Data: data}
	}
	res, err := p.store.System().Append(ctx, p.stream, varve.Any, out...)
	if err != nil {
		return 0, fmt.Errorf("delivery: park %d events: %w", len(evs), err)
	}
	return res.LastVersion, nil
}

// Resolve marks the parked events at positions as resolved ("replayed",
// "skipped"): they leave the list, and a stream without parked events is
// delivered again.
func (p *Parked) Resolve(ctx context.Context, how string, positions ...varve.Position) error {
	if len(positions) == 0 {
		return nil
	}
	data, err := json.Marshal(resolution{How: how, Positions: positions, At: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("delivery: resolve parked events of %q: %w", p.sub, err)
	}
	if _, err := p.store.System().Append(ctx, p.stream, varve.Any, varve.Event{Type: ResolvedEventType, Data: data}); err != nil {
		return fmt.Errorf("delivery: resolve %d parked events: %w", len(positions), err)
	}
	return nil
}

// List returns the parked events that are not resolved, in position order.
func (p *Parked) List(ctx context.Context) ([]ParkedEvent, error) {
	st := newParkedState()
	if err := p.load(ctx, st); err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	return st.list(), nil
}

// parkedState is the fold of a parked stream.
type parkedState struct {
	version   varve.Version
	open      map[varve.Position]ParkedEvent
	perStream map[string]int
	touched   map[string]bool // streams changed by the records applied, when not nil
}

func newParkedState() *parkedState {
	return &parkedState{open: map[varve.Position]ParkedEvent{}, perStream: map[string]int{}}
}

func (st *parkedState) list() []ParkedEvent {
	out := make([]ParkedEvent, 0, len(st.open))
	for _, pe := range st.open {
		out = append(out, pe)
	}
	slices.SortFunc(out, func(a, b ParkedEvent) int { return a.Position.Compare(b.Position) })
	return out
}

func (st *parkedState) apply(e varve.RecordedEvent) error {
	st.version = e.Version
	switch e.Type {
	case ParkedEventType:
		var pe ParkedEvent
		if err := json.Unmarshal(e.Data, &pe); err != nil {
			return fmt.Errorf("decode parked event %d: %w", e.Version, err)
		}
		if _, dup := st.open[pe.Position]; !dup {
			st.perStream[pe.Stream]++
		}
		st.open[pe.Position] = pe
		st.touch(pe.Stream)
	case ResolvedEventType:
		var r resolution
		if err := json.Unmarshal(e.Data, &r); err != nil {
			return fmt.Errorf("decode resolution %d: %w", e.Version, err)
		}
		for _, pos := range r.Positions {
			pe, ok := st.open[pos]
			if !ok {
				continue
			}
			delete(st.open, pos)
			st.touch(pe.Stream)
			if st.perStream[pe.Stream]--; st.perStream[pe.Stream] == 0 {
				delete(st.perStream, pe.Stream)
			}
		}
	}
	return nil
}

func (st *parkedState) touch(stream string) {
	if st.touched != nil {
		st.touched[stream] = true
	}
}

// load applies the records written after st.version. Its error says
// neither "delivery" nor, when it comes from the store, the subscription:
// the callers add what they need.
func (p *Parked) load(ctx context.Context, st *parkedState) error {
	for e, err := range p.store.ReadStream(ctx, p.stream, varve.From(st.version+1)) {
		if errors.Is(err, varve.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read parked events: %w", err)
		}
		if err := st.apply(e); err != nil {
			return fmt.Errorf("read parked events of %q: %w", p.sub, err)
		}
	}
	return nil
}

// Skip resolves the parked events that match (all when match is nil)
// without delivering them, and returns them.
func (p *Parked) Skip(ctx context.Context, match func(ParkedEvent) bool) ([]ParkedEvent, error) {
	list, err := p.List(ctx)
	if err != nil {
		return nil, err
	}
	var skipped []ParkedEvent
	var positions []varve.Position
	for _, pe := range list {
		if match == nil || match(pe) {
			skipped = append(skipped, pe)
			positions = append(positions, pe.Position)
		}
	}
	if err := p.Resolve(ctx, "skipped", positions...); err != nil {
		return nil, err
	}
	return skipped, nil
}

// ReplayFailure is a parked event whose replay failed.
type ReplayFailure struct {
	Event ParkedEvent
	Err   error
}

// ReplayResult says what a replay did.
type ReplayResult struct {
	// Delivered were delivered and resolved.
	Delivered []ParkedEvent
	// Failed holds the first failure of each stream that had one.
	Failed []ReplayFailure
	// Held counts the events left parked behind a failure of their stream.
	Held int
}

// Replay delivers the parked events that match (all when match is nil) to
// sink, each stream in version order, once each, with the event's original
// idempotency key, and resolves those the sink took. A stream stops at its
// first failure: that event and the later ones of the stream stay parked.
// A dispatcher that runs meanwhile delivers a stream again once none of its
// events is parked.
func (p *Parked) Replay(ctx context.Context, sink Sink, match func(ParkedEvent) bool) (ReplayResult, error) {
	var res ReplayResult
	list, err := p.List(ctx)
	if err != nil {
		return res, err
	}
	failed := map[string]bool{}
	for _, pe := range list {
		if match != nil && !match(pe) {
			continue
		}
		if failed[pe.Stream] {
			res.Held++
			continue
		}
		err := p.replayOne(ctx, sink, pe)
		if err == nil {
			err = p.Resolve(ctx, "replayed", pe.Position)
			if err != nil {
				return res, err
			}
			res.Delivered = append(res.Delivered, pe)
			continue
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("delivery: replay parked events of %q: %w", p.sub, ctx.Err())
		}
		failed[pe.Stream] = true
		res.Failed = append(res.Failed, ReplayFailure{Event: pe, Err: err})
	}
	slices.SortFunc(res.Failed, func(a, b ReplayFailure) int { return cmp.Compare(a.Event.Stream, b.Event.Stream) })
	return res, nil
}

func (p *Parked) replayOne(ctx context.Context, sink Sink, pe ParkedEvent) error {
	if pe.Event != nil {
		return sink.Deliver(ctx, Delivery{Subscription: p.sub, Event: *pe.Event, Attempt: pe.Attempts + 1, Key: Key(p.sub, pe.Position)})
	}
	var ev varve.RecordedEvent
	found := false
	for e, err := range p.store.ReadStream(ctx, pe.Stream, varve.From(pe.Version), varve.Limit(1)) {
		if err != nil {
			return fmt.Errorf("read version %d: %w", pe.Version, err)
		}
		ev, found = e, e.Version == pe.Version && e.ID == pe.EventID
	}
	if !found {
		return fmt.Errorf("%s@%d (id %s) is no longer in the store", pe.Stream, pe.Version, pe.EventID)
	}
	return sink.Deliver(ctx, Delivery{Subscription: p.sub, Event: ev, Attempt: pe.Attempts + 1, Key: Key(p.sub, pe.Position)})
}
