package varve

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Version is the version of an event within its stream. The first event of a
// stream has version 1; 0 means the stream has no events.
//
// Version is an alias of uint64, not a defined type: versions are counts
// that backends scan and encode with their drivers' native uint64/int64
// paths, and arithmetic on them (v+1, last-first) needs no conversions. The
// value that could be confused with a version, a log position, is a struct
// ([Position]), so the compiler already keeps the two apart.
type Version = uint64

// Event is an event to append. Its ID makes retries idempotent: an append
// whose events carry the ids of a committed append returns that append's
// result and writes nothing. A zero ID is replaced by a new UUIDv7 when the
// event is appended; [NewEvent] sets the ID when the event is built, which
// is what a retry needs.
type Event struct {
	ID       uuid.UUID
	Type     string
	Data     []byte
	Metadata []byte
	// Tags are the keys of Dynamic Consistency Boundaries ([Query]): at
	// most [MaxEventTags] of 1..[MaxTagLen] bytes. Only backends that keep
	// tags ([TagStore]) take events with tags.
	Tags []string
}

// NewEvent returns an event of type typ with data and a new UUIDv7 id, so
// that appending it again after an ambiguous failure is idempotent.
func NewEvent(typ string, data []byte) Event {
	return Event{ID: NewEventID(), Type: typ, Data: data}
}

// RecordedEvent is an event as stored: the event plus where and when it was
// written.
type RecordedEvent struct {
	ID         uuid.UUID
	Type       string
	Data       []byte
	Metadata   []byte
	Stream     string
	Version    Version
	Position   Position
	RecordedAt time.Time
	Tags       []string
}

// Size is len(Data)+len(Metadata): what [Config.MaxEventSize] bounds and
// what the byte budgets of reads ([PageBytes], [AllQuery.MaxBytes]) count.
func (e *RecordedEvent) Size() int { return len(e.Data) + len(e.Metadata) }

// Event returns the event part of a recorded event.
func (e RecordedEvent) Event() Event {
	return Event{ID: e.ID, Type: e.Type, Data: e.Data, Metadata: e.Metadata, Tags: e.Tags}
}

// ExpectedVersion is what an append or delete expects of the stream's current
// version: a version N >= 0 (0 is the same as [NoStream]), [Any] or
// [StreamExists].
type ExpectedVersion int64

const (
	// Any accepts the stream in whatever state, including not existing.
	Any ExpectedVersion = -1
	// NoStream requires that the stream has no events: it was never written,
	// or it was deleted.
	NoStream ExpectedVersion = 0
	// StreamExists requires that the stream has at least one event.
	StreamExists ExpectedVersion = -2
)

// Exact expects the stream's current version to be v.
func Exact(v Version) ExpectedVersion { return ExpectedVersion(v) }

// Matches reports whether a stream at version current (0 for a stream with
// no events) satisfies e.
func (e ExpectedVersion) Matches(current Version) bool {
	switch {
	case e == Any:
		return true
	case e == StreamExists:
		return current > 0
	case e >= 0:
		return Version(e) == current
	}
	return false
}

func (e ExpectedVersion) valid() bool { return e >= StreamExists }

func (e ExpectedVersion) String() string {
	switch {
	case e == Any:
		return "any"
	case e == NoStream:
		return "no-stream"
	case e == StreamExists:
		return "stream-exists"
	case e > 0:
		return fmt.Sprintf("%d", int64(e))
	}
	return fmt.Sprintf("invalid(%d)", int64(e))
}

// AppendResult describes a committed append.
type AppendResult struct {
	// FirstVersion and LastVersion are the versions of the first and last
	// events of the append.
	FirstVersion Version
	LastVersion  Version
	// Position is the global position of the append's last event.
	Position Position
}

// StreamInfo describes a stream.
type StreamInfo struct {
	Stream string
	// Version is the version of the stream's last event, 0 when it has none.
	Version Version
	// LastPosition is the global position of the stream's last event.
	LastPosition Position
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Deleted is set once the stream was deleted and until it is written again.
	Deleted bool
	// Tombstoned is set for a stream deleted for good.
	Tombstoned bool
}
