package command

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
)

var (
	// ErrInvalid: the command failed its validation.
	ErrInvalid = errors.New("command: invalid command")
	// ErrUnknownCommand: no handler is registered for the command's type.
	ErrUnknownCommand = errors.New("command: no handler for command")
)

// Envelope is a command on its way to its handler.
type Envelope struct {
	// ID names the command's intended effect: a retry has the same ID.
	ID            string
	Command       any
	CorrelationID string
	CausationID   string
}

// Result is the outcome of a command.
type Result struct {
	// Stream and Version are where the command's first event was written
	// (for [Aggregate], the aggregate's version after it); zero when it
	// appended nothing.
	Stream  string
	Version varve.Version
	// Duplicate: the command was seen to have run before with this id.
	// A concurrent retry that the store deduplicated by event id gets the
	// same Stream and Version with Duplicate false.
	Duplicate bool
}

// Handler runs a command.
type Handler func(ctx context.Context, env Envelope) (Result, error)

// Middleware wraps a handler.
type Middleware func(next Handler) Handler

// Bus dispatches commands to the handlers registered for their types. It
// is safe for concurrent use.
type Bus struct {
	mu       sync.RWMutex
	handlers map[reflect.Type]Handler
	mw       []Middleware
}

// New returns a bus whose handlers run inside mw, mw[0] outermost.
func New(mw ...Middleware) *Bus {
	return &Bus{handlers: map[reflect.Type]Handler{}, mw: mw}
}

// Handle registers h for commands of type C; registering C again fails
// with an error wrapping varve.ErrInvalidArgument.
func Handle[C any](b *Bus, h func(ctx context.Context, id string, c C) (Result, error)) error {
	t := reflect.TypeFor[C]()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.handlers[t]; ok {
		return fmt.Errorf("command: handler for %v registered twice: %w", t, varve.ErrInvalidArgument)
	}
	var run Handler = func(ctx context.Context, env Envelope) (Result, error) {
		return h(ctx, env.ID, env.Command.(C))
	}
	for i := len(b.mw) - 1; i >= 0; i-- {
		run = b.mw[i](run)
	}
	b.handlers[t] = run
	return nil
}

// Dispatch runs cmd, whose id is id (not empty), through the middleware
// and its handler.
func (b *Bus) Dispatch(ctx context.Context, id string, cmd any) (Result, error) {
	if id == "" {
		return Result{}, fmt.Errorf("command: empty command id: %w", varve.ErrInvalidArgument)
	}
	b.mu.RLock()
	h, ok := b.handlers[reflect.TypeOf(cmd)]
	b.mu.RUnlock()
	if !ok {
		return Result{}, fmt.Errorf("%w: %T", ErrUnknownCommand, cmd)
	}
	m := aggregate.MetadataFrom(ctx)
	env := Envelope{ID: id, Command: cmd, CorrelationID: m.CorrelationID, CausationID: id}
	if env.CorrelationID == "" {
		env.CorrelationID = id
	}
	ctx = aggregate.WithMetadata(ctx, aggregate.Metadata{CorrelationID: env.CorrelationID, CausationID: env.CausationID})
	return h(ctx, env)
}

// Validate is middleware that runs a command's Validate method, when it
// has one, and fails with an error wrapping ErrInvalid.
func Validate() Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, env Envelope) (Result, error) {
			if v, ok := env.Command.(interface{ Validate() error }); ok {
				if err := v.Validate(); err != nil {
					return Result{}, fmt.Errorf("%w %T %s: %w", ErrInvalid, env.Command, env.ID, err)
				}
			}
			return next(ctx, env)
		}
	}
}

func typeName(v any) string { return reflect.TypeOf(v).String() }
