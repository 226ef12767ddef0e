package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/varve-go/varve"
)

// Delivery is one attempt to hand an event to a [Sink].
type Delivery struct {
	// Subscription is the name of the subscription the event came from.
	Subscription string
	// Event is the event; its Data and Metadata must not be modified.
	Event varve.RecordedEvent
	// Attempt counts the attempts of this event, from 1.
	Attempt int
	// Key is the idempotency key: the same for every attempt and every
	// redelivery of the event, also after a crash or a replay.
	Key string
}

// Key returns the idempotency key of the event at pos for a subscription:
// "<subscription>:<position>".
func Key(subscription string, pos varve.Position) string {
	return subscription + ":" + pos.String()
}

// Sink receives the events of a dispatcher. Deliver is called by many
// goroutines at once, for different events. It returns nil once the event
// was taken; an error wrapped by [Permanent] to park the event at once; an
// error from [RetryAfter] to retry it after a given delay; any other error
// to retry it with backoff.
type Sink interface {
	Deliver(ctx context.Context, d Delivery) error
}

// SinkFunc is a Go function as a [Sink].
type SinkFunc func(ctx context.Context, d Delivery) error

// Deliver implements Sink.
func (f SinkFunc) Deliver(ctx context.Context, d Delivery) error { return f(ctx, d) }

// PermanentError marks a failure that no retry can fix, such as a request
// the receiver rejects: the event is parked without more attempts.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a [PermanentError].
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// RetryAfterError asks for the next attempt after a delay, such as an HTTP
// Retry-After.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.Err, e.After)
}
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err as a [RetryAfterError].
func RetryAfter(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryAfterError{Err: err, After: after}
}

// IsPermanent reports whether err asks to park the event without retrying.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

func retryAfter(err error) time.Duration {
	var r *RetryAfterError
	if errors.As(err, &r) {
		return r.After
	}
	return 0
}
