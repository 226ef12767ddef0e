// Package command dispatches typed commands to their handlers through a
// chain of middleware, and makes a command idempotent by its id.
//
// A [Bus] maps the Go type of a command to one handler, registered with
// [Handle]. [Bus.Dispatch] wraps the command in an [Envelope] (its id, the
// command, and the correlation and causation ids) and runs the bus's
// middleware, first registered outermost, then the handler. [Validate]
// turns the error of a command's Validate method into one wrapping
// [ErrInvalid]; [Trace] calls the store's tracer around each command when
// it implements [Tracer]. An unregistered type fails with
// [ErrUnknownCommand].
//
// Dispatch puts the envelope's correlation and causation ids into the
// context with [aggregate.WithMetadata], so events saved by
// aggregate.Repository, and events built by [Decide], carry them in their
// metadata (keys "correlation_id" and "causation_id"). The causation id
// is the command id; the correlation id is the one the context carried,
// or the command id when it carried none.
//
// # Idempotency
//
// A command id names one intended effect. [Decide] builds a handler on a
// DCB decider (package dcb) that is idempotent by command id, on the
// store's own guarantees and nothing kept in memory (the backend must keep
// tags, varve.TagStore; NATS does not, and Decide fails there with
// varve.ErrNotSupported):
//
//   - the first event of the decision carries the tag "cmd:<id>", and the
//     decider's query gains an item for that tag, so the read before the
//     decision sees an earlier outcome of the same command, and the
//     append's condition fails when another process appended it first;
//   - the events' ids are derived from the command id (UUIDv5), so the
//     store's idempotent append recognises a retry of a commit whose
//     answer was lost.
//
// A retried command (same id) whose events are in the store returns the
// first outcome (the stream and version of the event tagged with the id)
// and appends nothing; this holds when the first attempt's
// outcome was unknown to the caller and when two processes or buses
// dispatch it at once. A command that decided no events leaves no record:
// its retry decides again. A workflow dispatching commands derives the
// command id from what caused it (its inbox position), so a redelivery is
// a retry.
//
// [Aggregate] runs a command on an aggregate.Repository with ExecuteOnce,
// idempotent by command id on every backend: the events get ids derived
// from the command id, so the store's idempotent append recognises a
// retry, and a retry that decides differently (the state now holds the
// first outcome) finds the first outcome's events in one round trip that
// writes nothing (see aggregate.Repository.ExecuteOnce and docs/command.md).
package command
