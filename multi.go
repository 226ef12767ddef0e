package varve

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// StreamAppend is the part of a multi-stream append that writes one stream.
type StreamAppend struct {
	Stream   string
	Expected ExpectedVersion
	Events   []Event
}

// StreamCheck is the part of a multi-stream append that only checks the
// version of a stream it does not write.
type StreamCheck struct {
	Stream   string
	Expected ExpectedVersion
}

// MultiAppendRequest is a validated multi-stream append: 1 or more appends
// to distinct streams, each with at least one event, checks of other
// distinct streams, every event with a distinct id; at most
// Config.MaxAppendEvents events and Config.MaxAppendBytes bytes in all.
// Categories[i] is the category of Appends[i].Stream.
type MultiAppendRequest struct {
	Appends    []StreamAppend
	Checks     []StreamCheck
	Categories []string
}

// MultiAppender is the capability of a backend to append to several
// streams atomically: every part commits or none does. Each part is
// checked and written as a single append would be (expected version,
// tombstone, duplicate ids); a part whose first event id is in its stream
// is a retry, and the whole request is a retry when every part is one,
// returning the original results. A check fails as an append at that
// expected version would. The first part that fails decides the error:
// a [*WrongExpectedVersionError] naming its stream, or ErrStreamDeleted
// or ErrDuplicateEvent wrapped in a [*StreamError] naming it.
type MultiAppender interface {
	AppendMulti(ctx context.Context, req MultiAppendRequest) ([]AppendResult, error)
	// MultiAppendAvailable reports whether AppendMulti works on this
	// backend as opened; a backend whose support depends on what it finds
	// when it opens (NATS: the server's version) may say false, and the
	// Store then treats it as lacking the capability.
	MultiAppendAvailable() bool
}

// StreamError is the failure of one stream of a multi-stream append.
type StreamError struct {
	Stream string
	Err    error
}

func (e *StreamError) Error() string { return fmt.Sprintf("stream %q: %v", e.Stream, e.Err) }

func (e *StreamError) Unwrap() error { return e.Err }

// AppendMulti appends to several streams atomically, each part at its own
// expected version, and checks the versions of streams it does not write:
// either every part commits or none does. It returns one result per
// append, in order. A conflict is a [*WrongExpectedVersionError] whose
// Stream names the stream that failed; a tombstoned stream or a duplicate
// id is a [*StreamError] around ErrStreamDeleted or ErrDuplicateEvent.
// Retries are idempotent by event id, as for [Store.Append]. Backends
// without the capability give [ErrNotSupported].
func (s *Store) AppendMulti(ctx context.Context, appends []StreamAppend, checks ...StreamCheck) ([]AppendResult, error) {
	fail := func(err error) ([]AppendResult, error) {
		names := make([]string, len(appends))
		for i, a := range appends {
			names[i] = fmt.Sprintf("%q", a.Stream)
		}
		return nil, fmt.Errorf("varve: append to streams %s: %w", strings.Join(names, ", "), err)
	}
	if err := s.ready(ctx); err != nil {
		return fail(err)
	}
	if s.multi == nil {
		return fail(ErrNotSupported)
	}
	req, err := s.checkMulti(appends, checks)
	if err != nil {
		return fail(err)
	}
	var res []AppendResult
	if s.tr == nil {
		res, err = s.multi.AppendMulti(ctx, req)
	} else {
		res, err = s.appendMultiTraced(ctx, req)
	}
	if err != nil {
		return fail(err)
	}
	return res, nil
}

func (s *Store) checkMulti(appends []StreamAppend, checks []StreamCheck) (MultiAppendRequest, error) {
	if len(appends) == 0 {
		return MultiAppendRequest{}, invalid("no stream to append to")
	}
	seen := make(map[string]bool, len(appends)+len(checks))
	var all []Event
	total, size := 0, 0
	for i := range appends {
		a := &appends[i]
		if err := checkStream(a.Stream, false); err != nil {
			return MultiAppendRequest{}, err
		}
		if seen[a.Stream] {
			return MultiAppendRequest{}, invalid("stream %q appears twice", a.Stream)
		}
		seen[a.Stream] = true
		if !a.Expected.valid() {
			return MultiAppendRequest{}, invalid("stream %q: expected version %d", a.Stream, int64(a.Expected))
		}
		if len(a.Events) == 0 {
			return MultiAppendRequest{}, invalid("stream %q: no events", a.Stream)
		}
		total += len(a.Events)
		for _, e := range a.Events {
			size += len(e.Data) + len(e.Metadata)
		}
	}
	for _, c := range checks {
		if err := checkStream(c.Stream, true); err != nil {
			return MultiAppendRequest{}, err
		}
		if seen[c.Stream] {
			return MultiAppendRequest{}, invalid("stream %q appears twice", c.Stream)
		}
		seen[c.Stream] = true
		if !c.Expected.valid() || c.Expected == Any {
			return MultiAppendRequest{}, invalid("check of stream %q: expected version %s", c.Stream, c.Expected)
		}
	}
	if total > s.cfg.MaxAppendEvents {
		return MultiAppendRequest{}, invalid("%d events in one append, limit %d", total, s.cfg.MaxAppendEvents)
	}
	if size > s.cfg.MaxAppendBytes {
		return MultiAppendRequest{}, invalid("append of more than %d bytes of data+metadata (Config.MaxAppendBytes)", s.cfg.MaxAppendBytes)
	}
	cats := make([]string, len(appends))
	for i := range appends {
		a := &appends[i]
		// Each part's events: types, sizes, missing ids.
		if err := s.checkAppend(a.Stream, a.Expected, a.Events, false); err != nil {
			return MultiAppendRequest{}, fmt.Errorf("stream %q: %w", a.Stream, err)
		}
		cats[i] = s.Category(a.Stream)
		all = append(all, a.Events...)
	}
	if err := checkDistinctIDs(all); err != nil {
		return MultiAppendRequest{}, err
	}
	return MultiAppendRequest{Appends: slices.Clone(appends), Checks: slices.Clone(checks), Categories: cats}, nil
}
