package varve

import (
	"context"
	"fmt"
)

// Append appends events atomically to stream if its version matches
// expected, and returns where they were written.
//
// Retries are idempotent by event id: build the events with [NewEvent] (or
// set their IDs) and pass the same events again after an ambiguous failure
// (a timeout, a lost connection); the original result comes back and
// nothing is written twice. An event with a zero ID gets a new UUIDv7,
// written into the slice that carries it, so only a retry that passes that
// very slice (events...) reuses it.
func (s *Store) Append(ctx context.Context, stream string, expected ExpectedVersion, events ...Event) (AppendResult, error) {
	return s.append(ctx, stream, expected, events, false)
}

func (s *Store) append(ctx context.Context, stream string, expected ExpectedVersion, events []Event, system bool) (AppendResult, error) {
	err := s.ready(ctx)
	if err == nil {
		err = s.checkAppend(stream, expected, events, system)
	}
	if err != nil {
		return AppendResult{}, fmt.Errorf("varve: append to stream %q: %w", stream, err)
	}
	req := AppendRequest{Stream: stream, Expected: expected, Events: events, Category: s.Category(stream)}
	var res AppendResult
	if s.tr == nil {
		res, err = s.b.Append(ctx, req)
	} else {
		res, err = s.appendTraced(ctx, opAppend, req, AppendCondition{}, s.b.Append)
	}
	if err != nil {
		return AppendResult{}, fmt.Errorf("varve: append to stream %q: %w", stream, err)
	}
	return res, nil
}

// Truncate removes the events of stream with versions below before. The
// stream's version does not change.
func (s *Store) Truncate(ctx context.Context, stream string, before Version) error {
	return s.truncate(ctx, stream, before, false)
}

func (s *Store) truncate(ctx context.Context, stream string, before Version, system bool) error {
	err := s.ready(ctx)
	if err == nil {
		err = s.checkLifecycle(stream, system)
	}
	if err == nil {
		err = s.b.Truncate(ctx, stream, before)
	}
	if err != nil {
		return fmt.Errorf("varve: truncate stream %q before %d: %w", stream, before, err)
	}
	return nil
}

// Delete removes every event of stream if its version matches expected. A
// later append with [NoStream] or [Any] starts the stream afresh at version 1.
func (s *Store) Delete(ctx context.Context, stream string, expected ExpectedVersion) error {
	return s.delete(ctx, stream, expected, false, false)
}

// Tombstone deletes stream for good: every later append fails with
// [ErrStreamDeleted].
func (s *Store) Tombstone(ctx context.Context, stream string, expected ExpectedVersion) error {
	return s.delete(ctx, stream, expected, true, false)
}

func (s *Store) delete(ctx context.Context, stream string, expected ExpectedVersion, tombstone, system bool) error {
	err := s.ready(ctx)
	if err == nil {
		err = s.checkLifecycle(stream, system)
	}
	if err == nil && !expected.valid() {
		err = invalid("expected version %d", int64(expected))
	}
	if err == nil {
		err = s.b.Delete(ctx, stream, expected, tombstone)
	}
	if err != nil {
		what := "delete"
		if tombstone {
			what = "tombstone"
		}
		return fmt.Errorf("varve: %s stream %q: %w", what, stream, err)
	}
	return nil
}

func (s *Store) checkLifecycle(stream string, system bool) error {
	if err := checkStream(stream, system); err != nil {
		return err
	}
	if system && !isSystem(stream) {
		return invalid("%q is not a system stream (they begin with %q)", stream, SystemPrefix)
	}
	return nil
}

// System is a store's access to system streams: streams whose id begins with
// [SystemPrefix], where packages built on the store keep records of their
// own (package delivery keeps parked events in "$parked-<name>"). The
// Store's own Append, Truncate, Delete and Tombstone refuse these ids, so an
// application cannot write them by mistake; reads and StreamInfo accept them.
// Subscriptions skip system streams unless they ask for them.
type System struct{ s *Store }

// System returns the store's access to system streams.
func (s *Store) System() System { return System{s} }

// Append is [Store.Append] for a system stream.
func (y System) Append(ctx context.Context, stream string, expected ExpectedVersion, events ...Event) (AppendResult, error) {
	return y.s.append(ctx, stream, expected, events, true)
}

// Truncate is [Store.Truncate] for a system stream.
func (y System) Truncate(ctx context.Context, stream string, before Version) error {
	return y.s.truncate(ctx, stream, before, true)
}

// Delete is [Store.Delete] for a system stream.
func (y System) Delete(ctx context.Context, stream string, expected ExpectedVersion) error {
	return y.s.delete(ctx, stream, expected, false, true)
}
