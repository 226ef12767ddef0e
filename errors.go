package varve

import (
	"errors"
	"fmt"
)

// Sentinel errors shared by every backend. Test for them with errors.Is.
// Their texts carry no package prefix: the [Store] says which operation and
// stream failed, once.
var (
	// ErrWrongExpectedVersion: the stream's version did not match the append's
	// or delete's expectation. The error is a *WrongExpectedVersionError.
	ErrWrongExpectedVersion = errors.New("wrong expected version")
	// ErrStreamNotFound: the stream has no events, never had or was deleted.
	ErrStreamNotFound = errors.New("stream not found")
	// ErrStreamDeleted: the stream was tombstoned; it can't be read or written.
	ErrStreamDeleted = errors.New("stream deleted")
	// ErrInvalidArgument: the request breaks a documented limit or rule.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrDuplicateEvent: an event id of the append is already in the stream,
	// and the append is not an exact retry of the append that wrote it.
	ErrDuplicateEvent = errors.New("duplicate event id")
	// ErrClosed: the store or backend was closed.
	ErrClosed = errors.New("closed")
	// ErrNotSupported: the backend lacks the capability the call needs
	// (snapshots, checkpoints, ...). See [Store.Snapshots] and its siblings.
	ErrNotSupported = errors.New("not supported by the backend")
	// ErrInline: an inline projection, a hook that a SQL backend runs in
	// the transaction of each append, failed; the append was rolled back.
	// The error wraps the hook's error too.
	ErrInline = errors.New("inline projection failed")
	// ErrUnknownOutcome: a write was sent, and no answer that settles it
	// came (the connection failed, the server crashed or was shut down, or
	// the call's context ended while the commit waited for a standby): the
	// write may have been made or not, or made only where a fail-over can
	// lose it.
	// Read to find out, or retry it: an append retried with the same event
	// ids is recognized as a retry when it was made.
	ErrUnknownOutcome = errors.New("outcome unknown")
)

// WrongExpectedVersionError reports an optimistic concurrency conflict.
type WrongExpectedVersionError struct {
	// Stream is the stream of the conflict; the error's text leaves it to the
	// operation that wraps it.
	Stream   string
	Expected ExpectedVersion
	// Actual is the stream's current version, 0 when it has no events.
	Actual Version
}

func (e *WrongExpectedVersionError) Error() string {
	return fmt.Sprintf("wrong expected version: expected %s, actual %d", e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrWrongExpectedVersion) true.
func (e *WrongExpectedVersionError) Is(target error) bool { return target == ErrWrongExpectedVersion }

// invalid returns an error that wraps ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}
