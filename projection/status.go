package projection

import (
	"time"

	"github.com/varve-go/varve"
)

// State is what a runner is doing.
type State uint8

const (
	// Idle: Run was not called yet, or returned.
	Idle State = iota
	// CatchingUp: the runner reads events that were in the log when it
	// started.
	CatchingUp
	// Live: the runner has reached the head of the log and follows it.
	Live
	// Paused: Pause was called.
	Paused
	// Failed: Run returned an error.
	Failed
	// Rebuilding: the runner replays the log after a [Rebuild] request.
	Rebuilding
)

func (s State) String() string {
	return [...]string{"idle", "catching-up", "live", "paused", "failed", "rebuilding"}[s]
}

// MarshalText implements encoding.TextMarshaler.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Status is a snapshot of a runner.
type Status struct {
	Name    string
	Version int
	State   State
	// Position is the checkpoint: everything up to it is handled.
	Position varve.Position
	// Head is the last position of the log when it was last looked at.
	Head varve.Position
	// Lag is the number of events (of any stream) between Position and
	// Head, on backends whose positions count events (memory, SQLite,
	// NATS); -1 where they do not (PostgreSQL).
	Lag int64
	// LagTime is how long ago the first event after Position was
	// appended, when Head was last looked at (at most once a second while
	// catching up); 0 once Position reaches Head.
	LagTime time.Duration
	// Rate is the events handled per second over the last batches.
	Rate float64
	// Handled counts the events handled by this runner; Parked the events
	// it parked.
	Handled, Parked int64
	// LastError is the last handler or read error, "" when none.
	LastError string
}

// Status returns the runner's status.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

func (r *Runner) set(f func(*Status)) {
	r.mu.Lock()
	f(&r.st)
	r.mu.Unlock()
	r.moved.Notify()
}

func lag(pos, head varve.Position) int64 {
	if pos.Commit != 0 || head.Commit != 0 {
		return -1
	}
	if head.Seq <= pos.Seq {
		return 0
	}
	return int64(head.Seq - pos.Seq)
}
