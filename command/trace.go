package command

import (
	"context"
	"time"

	"github.com/varve-go/varve"
)

// Tracer traces commands. [Trace] finds it on the store's
// varve.Config.Tracer (or on what a varve.StoreTracer returns for the
// store), beside the store's own hooks, so one tracer sees a command and
// the appends and reads it makes (they run in the context its start hook
// returned).
type Tracer interface {
	TraceCommandStart(ctx context.Context, data TraceStartData) context.Context
	TraceCommandEnd(ctx context.Context, data TraceEndData)
}

// TraceStartData describes a command about to run.
type TraceStartData struct {
	ID            string
	Type          string // the command's Go type, as %T prints it
	CorrelationID string
}

// TraceEndData is the outcome of a traced command.
type TraceEndData struct {
	Result   Result
	Err      error
	Duration time.Duration
}

// Trace is middleware that calls the store's Tracer around each command;
// it adds nothing when the store's tracer is not a Tracer.
func Trace(store *varve.Store) Middleware {
	t := store.Config().Tracer
	if st, ok := t.(varve.StoreTracer); ok {
		t = st.TracerFor(store.Backend().Features())
	}
	tr, ok := t.(Tracer)
	if !ok {
		return func(next Handler) Handler { return next }
	}
	return func(next Handler) Handler {
		return func(ctx context.Context, env Envelope) (Result, error) {
			start := time.Now()
			ctx = tr.TraceCommandStart(ctx, TraceStartData{ID: env.ID, Type: typeName(env.Command), CorrelationID: env.CorrelationID})
			r, err := next(ctx, env)
			tr.TraceCommandEnd(ctx, TraceEndData{Result: r, Err: err, Duration: time.Since(start)})
			return r, err
		}
	}
}
