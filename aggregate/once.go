package aggregate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// errRetried: the store took a save for a retry of a committed append.
var errRetried = errors.New("aggregate: the events' ids are those of a committed append")

// onceSpace is the UUIDv5 namespace of the ids of ExecuteOnce's events.
var onceSpace = uuid.MustParse("2f4b8e1a-9c3d-4f6e-8a1b-7d5c3e9f0b24")

// onceID is the id of the i-th event command commandID raises in stream.
func onceID(stream, commandID string, i int) uuid.UUID {
	return uuid.NewSHA1(onceSpace, []byte(stream+"\x00"+commandID+"\x00"+strconv.Itoa(i)))
}

// Once is what [Repository.ExecuteOnce] did.
type Once struct {
	// First and Last are the versions of the command's events in the
	// stream, written by this call or, when Duplicate, by an earlier one;
	// zero when the command raised none.
	First, Last varve.Version
	// Duplicate: the command had run before with this id; this call wrote
	// nothing.
	Duplicate bool
}

// ExecuteOnce is [Repository.Execute] made idempotent by commandID, a
// name for the command's intended effect that a retry repeats: a command
// whose events are in the stream already is not run again, and the
// versions of its events come back with Duplicate set. This holds across
// processes, after an answer lost on its way back (varve.ErrUnknownOutcome,
// a crash), and for retries that run at once, on the store's guarantees
// only:
//
//   - the events the command raises get ids derived from the stream, the
//     command id and their index (UUIDv5), so the store answers a save of
//     them that it has committed before with that commit's result (the
//     idempotent append), or with varve.ErrDuplicateEvent when this run
//     raised other events;
//   - a run that fails or raises nothing (a retry deciding on the state
//     after the first run) first looks for the command's first event in
//     the stream, in one round trip that writes nothing: an append of that
//     id alone at a version the stream cannot have, which the store
//     answers with the event's result if it is there.
//
// Two retries that run at once on the same state both get the first
// outcome; the one whose save the store deduplicated sees Duplicate false,
// as does a retry from a repository whose cached state is older than the
// first run (nothing is written twice either way).
// A command that raised no events leaves no trace: its retry runs again.
// The command's events are its only record: a retry comes as a duplicate
// only while its first event is in the stream. Truncating it away (package
// retention's MaxCount, MaxAge, TruncateBefore) or deleting the stream
// frees its ids in every backend, and a retry after that runs the command
// again, on a state that holds its effect (a snapshot's); keep a stream's
// events for longer than its commands can be retried.
// The aggregate returned is the one saved, or, for a duplicate, the one
// read from the store.
func (r *Repository[T]) ExecuteOnce(ctx context.Context, id, commandID string, command func(*Aggregate[T]) error) (*Aggregate[T], Once, error) {
	if commandID == "" {
		return nil, Once{}, fmt.Errorf("aggregate: execute on %s: empty command id: %w", r.Stream(id), varve.ErrInvalidArgument)
	}
	return r.execute(ctx, id, commandID, command)
}

// probeType is the type of the probe earlier appends; the probe is never
// written.
const probeType = "aggregate.once-probe"

// earlier looks for the events of an earlier run of commandID in the
// aggregate's stream and returns them as a duplicate; when there are none
// it returns a (nil when cause is set) and cause.
func (r *Repository[T]) earlier(ctx context.Context, id string, a *Aggregate[T], commandID string, cause error) (*Aggregate[T], Once, error) {
	stream := r.Stream(id)
	probe := varve.Event{ID: onceID(stream, commandID, 0), Type: probeType}
	res, err := r.store.Append(ctx, stream, varve.Exact(math.MaxInt64), probe)
	switch {
	case err == nil:
	case errors.Is(err, varve.ErrWrongExpectedVersion):
		if cause != nil {
			return nil, Once{}, cause
		}
		return a, Once{}, nil
	default:
		return nil, Once{}, fmt.Errorf("aggregate: execute on %s: look for command %s: %w", stream, commandID, err)
	}
	if res.FirstVersion != res.LastVersion {
		return nil, Once{}, fmt.Errorf("aggregate: execute on %s: look for command %s: the store answered versions %d-%d for one event",
			stream, commandID, res.FirstVersion, res.LastVersion)
	}
	return r.duplicate(ctx, id, commandID, res.FirstVersion, res.LastVersion)
}

// duplicate returns the aggregate as stored and the versions of the events
// of an earlier run of commandID, of which first..last are known.
func (r *Repository[T]) duplicate(ctx context.Context, id, commandID string, first, last varve.Version) (*Aggregate[T], Once, error) {
	stream := r.Stream(id)
	for e, err := range r.store.ReadStream(ctx, stream, varve.From(last+1)) {
		if err != nil {
			return nil, Once{}, fmt.Errorf("aggregate: execute on %s: read command %s: %w", stream, commandID, err)
		}
		if e.ID != onceID(stream, commandID, int(e.Version-first)) {
			break
		}
		last = e.Version
	}
	a, err := r.getOrCreate(ctx, id, loadOptions{fromStore: true})
	if err != nil {
		return nil, Once{}, err
	}
	return a, Once{First: first, Last: last, Duplicate: true}, nil
}
