package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// Records of failures and of an operator's requests.
const (
	// TypeFailed records an input whose Decide or append failed, with the
	// error; it stays the instance's last error until the input is handled.
	TypeFailed = "workflow.failed"
	// TypeCancelled ends an instance: its runner takes no input after it
	// and relays none of its unsent commands; the cancel's append cancels
	// its pending timers too.
	TypeCancelled = "workflow.cancelled"
	// TypeRetryRequested asks the instance's runner to apply the failed
	// input again (Runner.Handle, when its subscription reads the
	// workflow's own category).
	TypeRetryRequested = "workflow.retry-requested"
)

// ErrCancelled is returned by an operator's request on a cancelled instance.
var ErrCancelled = errors.New("workflow: instance cancelled")

// ErrNoFailure is returned by Retry on an instance without a failure to retry.
var ErrNoFailure = errors.New("workflow: no failed input to retry")

type failedRec struct {
	Input uuid.UUID `json:"input"`
	Type  string    `json:"type"`
	Data  []byte    `json:"data,omitempty"`
	Timer string    `json:"timer,omitempty"`
	Error string    `json:"error"`
}

type cancelRec struct {
	Reason string `json:"reason,omitempty"`
}

// Failure is an input that failed and has not been handled since.
type Failure struct {
	Input uuid.UUID `json:"input"`
	Type  string    `json:"type"`
	Timer string    `json:"timer,omitempty"`
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// Status is an instance as an operator sees it, without its state's type:
// what the instance stream's records say.
type Status struct {
	Stream  string        `json:"stream"`
	Version varve.Version `json:"version"`
	Inputs  int           `json:"inputs"`
	// LastInput is when the last input was recorded (zero: none yet).
	LastInput time.Time `json:"last_input,omitzero"`
	// LastEvent is the type of the last state event.
	LastEvent string    `json:"last_event,omitempty"`
	Unsent    []Command `json:"unsent,omitempty"`  // Data left out
	Pending   []Timer   `json:"pending,omitempty"` // by due time
	Cancelled bool      `json:"cancelled"`
	Reason    string    `json:"reason,omitempty"` // of the cancel
	LastError *Failure  `json:"last_error,omitempty"`
}

// Inspect reads the instance stream stream (Runner.Stream's name) and
// reports its status; varve.ErrStreamNotFound when there is none.
func Inspect(ctx context.Context, store *varve.Store, stream string) (Status, error) {
	l := newLedger(stream)
	st := Status{Stream: stream}
	for e, err := range store.ReadStream(ctx, stream) {
		if err != nil {
			return Status{}, fmt.Errorf("workflow: inspect %s: %w", stream, err)
		}
		engine, err := l.add(&e)
		if err != nil {
			return Status{}, err
		}
		if !engine {
			st.LastEvent = e.Type
		}
	}
	l.done()
	st.Version, st.Inputs, st.LastInput = l.version, l.handled, l.lastInput
	st.Cancelled, st.Reason, st.LastError = l.cancelled, l.reason, l.lastError()
	for _, c := range l.unsent(stream) {
		c.Data = nil
		st.Unsent = append(st.Unsent, c)
	}
	for id, due := range l.pending {
		st.Pending = append(st.Pending, Timer{ID: id, Due: due})
	}
	slices.SortFunc(st.Pending, func(a, b Timer) int {
		if c := a.Due.Compare(b.Due); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return st, nil
}

// Page is one page of a workflow's instances.
type Page struct {
	Instances []Status `json:"instances"`
	// Next is the After of the following page; empty on the last.
	Next string `json:"next,omitempty"`
}

// List returns the instances of the workflow name whose stream ids sort
// after after (a Page's Next), at most limit of them (0: 50), each
// inspected. The store must list streams (varve.ErrNotSupported if not).
func List(ctx context.Context, store *varve.Store, name, after string, limit int) (Page, error) {
	if limit <= 0 {
		limit = 50
	}
	page, err := store.Streams().List(ctx, varve.ListQuery{Prefix: InstanceStream(store, name, ""), After: after, Limit: limit}, false)
	if err != nil {
		return Page{}, fmt.Errorf("workflow: list %s: %w", name, err)
	}
	out := Page{Next: page.Next}
	for _, info := range page.Streams {
		st, err := Inspect(ctx, store, info.Stream)
		if errors.Is(err, varve.ErrStreamNotFound) || errors.Is(err, varve.ErrStreamDeleted) {
			continue
		}
		if err != nil {
			return Page{}, err
		}
		out.Instances = append(out.Instances, st)
	}
	return out, nil
}

// Cancel ends the instance stream stream: in one append at the version it
// read, a cancel record with reason and the cancels of its pending
// timers. Its runner takes no input after it. ErrCancelled if it was
// already; varve.ErrStreamNotFound if there is no such instance.
func Cancel(ctx context.Context, store *varve.Store, stream, reason string) error {
	for {
		st, err := Inspect(ctx, store, stream)
		if err != nil {
			return err
		}
		if st.Cancelled {
			return ErrCancelled
		}
		b, err := json.Marshal(cancelRec{Reason: reason})
		if err != nil {
			return err
		}
		evs := []varve.Event{{ID: varve.NewEventID(), Type: TypeCancelled, Data: b}}
		for _, t := range st.Pending {
			tb, _ := json.Marshal(timerRec{ID: t.ID})
			evs = append(evs, varve.Event{ID: varve.NewEventID(), Type: TypeTimerCancel, Data: tb})
		}
		_, err = store.Append(ctx, stream, varve.Exact(st.Version), evs...)
		if errors.Is(err, varve.ErrWrongExpectedVersion) {
			continue // the instance moved on: look again
		}
		if err != nil {
			return fmt.Errorf("workflow: cancel %s: %w", stream, err)
		}
		return nil
	}
}

// Retry asks the runner of the instance stream stream to apply its failed
// input again: it appends a retry request, which Runner.Handle carries
// out when its subscription reads the workflow's own category. It returns
// the failure retried; ErrNoFailure when there is none, ErrCancelled on a
// cancelled instance.
func Retry(ctx context.Context, store *varve.Store, stream string) (Failure, error) {
	st, err := Inspect(ctx, store, stream)
	if err != nil {
		return Failure{}, err
	}
	if st.Cancelled {
		return Failure{}, ErrCancelled
	}
	if st.LastError == nil {
		return Failure{}, ErrNoFailure
	}
	b, err := json.Marshal(failedRec{Input: st.LastError.Input})
	if err != nil {
		return Failure{}, err
	}
	if _, err := store.Append(ctx, stream, varve.Exact(st.Version), varve.Event{ID: varve.NewEventID(), Type: TypeRetryRequested, Data: b}); err != nil {
		return Failure{}, fmt.Errorf("workflow: retry %s: %w", stream, err)
	}
	return *st.LastError, nil
}

// recordFailure records that input failed with cause in the instance
// stream, once per input and retry request, and returns cause.
func (r *Runner[S]) recordFailure(ctx context.Context, stream string, inst *Instance[S], input Input, cause error) error {
	b, err := json.Marshal(failedRec{Input: input.ID, Type: input.Type, Data: input.Data, Timer: input.Timer, Error: cause.Error()})
	if err != nil {
		return cause
	}
	ev := varve.Event{ID: derive(stream, input.ID, "failed"+strconv.Itoa(inst.retries[input.ID])), Type: TypeFailed, Data: b}
	if _, err := r.store.Append(ctx, stream, varve.Any, ev); err != nil && !errors.Is(err, varve.ErrDuplicateEvent) {
		return errors.Join(cause, fmt.Errorf("workflow: %s: record the failure: %w", stream, err))
	}
	return cause
}

// retry applies again the failed input that a retry request of instance
// id names; a request for an input handled since does nothing.
func (r *Runner[S]) retry(ctx context.Context, id string, data []byte) error {
	var req failedRec
	if err := json.Unmarshal(data, &req); err != nil {
		return instanceError{fmt.Errorf("workflow: %s: retry request: %w", r.Stream(id), err)}
	}
	inst, err := r.Load(ctx, id)
	if err != nil {
		return err
	}
	f, ok := inst.failed[req.Input]
	if !ok || inst.Cancelled {
		return nil
	}
	_, err = r.apply(ctx, id, Input{ID: f.rec.Input, Type: f.rec.Type, Data: f.rec.Data, Timer: f.rec.Timer}, r.clock.Now())
	return err
}
