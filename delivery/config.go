package delivery

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/subscription"
)

// Ordering is the order in which a dispatcher delivers events.
type Ordering uint8

const (
	// PerStream delivers the events of a stream in version order, at most
	// one at a time; events of different streams run concurrently.
	PerStream Ordering = iota
	// Unordered delivers any event as soon as a worker is free.
	Unordered
)

func (o Ordering) String() string {
	switch o {
	case PerStream:
		return "per-stream"
	case Unordered:
		return "none"
	}
	return fmt.Sprintf("Ordering(%d)", uint8(o))
}

// ParseOrdering parses "per-stream" or "none".
func ParseOrdering(s string) (Ordering, error) {
	switch s {
	case "per-stream", "stream":
		return PerStream, nil
	case "none", "unordered":
		return Unordered, nil
	}
	return 0, fmt.Errorf("delivery: ordering %q: want per-stream or none: %w", s, varve.ErrInvalidArgument)
}

// Defaults of a [Config].
const (
	DefaultConcurrency        = 16
	DefaultMaxAttempts        = 10
	DefaultInitialBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff         = 30 * time.Second
	DefaultJitter             = 0.2
	DefaultAttemptTimeout     = 30 * time.Second
	DefaultCheckpointInterval = time.Second
	DefaultParkedPollInterval = 5 * time.Second
	DefaultDrainTimeout       = 10 * time.Second
	// DefaultWindowPerWorker sizes the default window: 64 pending events
	// per worker, at least 1,024.
	DefaultWindowPerWorker = 64
)

// Config configures a [Dispatcher]. The zero value gives the defaults.
type Config struct {
	// Concurrency is the number of deliveries that may run at once (C).
	Concurrency int
	// Ordering is PerStream (default) or Unordered.
	Ordering Ordering
	// Window bounds the events read but not yet delivered or parked; the
	// reader waits while it is full (it may overshoot by one page). Default
	// 64 per worker, at least 1,024. Delivered events cost nothing, however
	// far the checkpoint lags behind them.
	Window int
	// Retry says how a failing event is retried before it is parked;
	// defaults: 10 attempts, backoff from 100ms doubling to 30s, jitter 0.2.
	Retry subscription.RetryPolicy
	// AttemptTimeout bounds one delivery attempt; default 30s, negative
	// for none. A watchdog enforces it, to within an eighth of it (at most
	// a second), so that attempts need no timer of their own; sinks such as
	// the webhook have their own, precise timeouts.
	AttemptTimeout time.Duration
	// CheckpointInterval is how often the checkpoint is saved when it moved;
	// default 1s. It is also saved when Run returns.
	CheckpointInterval time.Duration
	// ParkedPollInterval is how often the parked store is read to learn
	// that parked events were replayed or skipped, so that their streams
	// flow again; default 5s.
	ParkedPollInterval time.Duration
	// DrainTimeout bounds how long Run waits, once its context ends, for
	// the deliveries in flight; then their contexts are cancelled, and Run
	// waits for the sinks to return. Default 10s.
	DrainTimeout time.Duration
	// Parked keeps the parked events; default NewParked on the
	// subscription's store and name. A [Source] whose events are in no
	// varve store (NewFromSource) requires it: its parked records then keep
	// the whole event, so that a replay needs nothing from the source.
	Parked *Parked
	// Logger logs parked events and failures; default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Concurrency < 0 || c.Window < 0 || c.CheckpointInterval < 0 || c.ParkedPollInterval < 0 ||
		c.DrainTimeout < 0 {
		return c, fmt.Errorf("delivery: config: %w: negative value", varve.ErrInvalidArgument)
	}
	if c.Ordering > Unordered {
		return c, fmt.Errorf("delivery: config: %w: ordering %v", varve.ErrInvalidArgument, c.Ordering)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Window == 0 {
		c.Window = max(1024, DefaultWindowPerWorker*c.Concurrency)
	}
	r, err := c.Retry.WithDefaults(subscription.RetryPolicy{MaxAttempts: DefaultMaxAttempts,
		InitialBackoff: DefaultInitialBackoff, MaxBackoff: DefaultMaxBackoff, Jitter: DefaultJitter})
	if err != nil {
		return c, fmt.Errorf("delivery: config: %w", err)
	}
	c.Retry = r
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.ParkedPollInterval == 0 {
		c.ParkedPollInterval = DefaultParkedPollInterval
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
