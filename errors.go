package varve

import (
	"errors"
	"fmt"
)

// Sentinel errors shared by every backend. Test for them with errors.Is.
var (
	// ErrWrongExpectedVersion: the stream's version did not match the append's
	// or delete's expectation. The error is a *WrongExpectedVersionError.
	ErrWrongExpectedVersion = errors.New("varve: wrong expected version")
	// ErrStreamNotFound: the stream has no events, never had or was deleted.
	ErrStreamNotFound = errors.New("varve: stream not found")
	// ErrStreamDeleted: the stream was tombstoned; it can't be read or written.
	ErrStreamDeleted = errors.New("varve: stream deleted")
	// ErrInvalidArgument: the request breaks a documented limit or rule.
	ErrInvalidArgument = errors.New("varve: invalid argument")
	// ErrDuplicateEvent: an event id of the append is already in the stream,
	// and the append is not an exact retry of the append that wrote it.
	ErrDuplicateEvent = errors.New("varve: duplicate event id")
	// ErrClosed: the store or backend was closed.
	ErrClosed = errors.New("varve: closed")
)

// WrongExpectedVersionError reports an optimistic concurrency conflict.
type WrongExpectedVersionError struct {
	Stream   string
	Expected ExpectedVersion
	// Actual is the stream's current version, 0 when it has no events.
	Actual Version
}

func (e *WrongExpectedVersionError) Error() string {
	return fmt.Sprintf("varve: wrong expected version for stream %q: expected %s, actual %d",
		e.Stream, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrWrongExpectedVersion) true.
func (e *WrongExpectedVersionError) Is(target error) bool { return target == ErrWrongExpectedVersion }

// invalid returns an error that wraps ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}
