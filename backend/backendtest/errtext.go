package backendtest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/varve-go/varve"
)

// testErrorsNameStreamOnce: an error that reaches the caller names its
// stream exactly once. The Store names the operation and the stream; a
// backend adds only what is its own, so a failure is not reported as
// `append to "s": ... append to "s": ... stream "s"`.
func testErrorsNameStreamOnce(t *testing.T, f Factory) {
	s := store(t, f)
	pfx := prefix(t)
	ctx := ctxFor(t)
	live, tomb := pfx+"live", pfx+"tomb"
	known := events("Known", 2)
	mustAppend(t, s, live, varve.NoStream, known...)
	mustAppend(t, s, tomb, varve.NoStream, events("E", 1)...)
	if err := s.Tombstone(ctx, tomb, varve.Any); err != nil {
		t.Fatal(err)
	}
	missing := pfx + "missing"
	read := func(stream string) func() error {
		return func() error {
			_, err := collect(s.ReadStream(ctx, stream))
			return err
		}
	}
	appendTo := func(stream string, exp varve.ExpectedVersion, evs ...varve.Event) func() error {
		return func() error {
			_, err := s.Append(ctx, stream, exp, evs...)
			return err
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name   string
		stream string
		want   error
		call   func() error
	}{
		{"append at a wrong version", live, varve.ErrWrongExpectedVersion, appendTo(live, varve.Exact(7), events("E", 1)...)},
		{"append with no-stream to a stream", live, varve.ErrWrongExpectedVersion, appendTo(live, varve.NoStream, events("E", 1)...)},
		{"append with stream-exists to a new stream", missing, varve.ErrWrongExpectedVersion, appendTo(missing, varve.StreamExists, events("E", 1)...)},
		{"append of a known id then a new one", live, varve.ErrDuplicateEvent, appendTo(live, varve.Any, known[0], events("E", 1)[0])},
		{"append to a tombstone", tomb, varve.ErrStreamDeleted, appendTo(tomb, varve.Any, events("E", 1)...)},
		{"append of an invalid event", live, varve.ErrInvalidArgument, appendTo(live, varve.Any, varve.Event{Data: []byte("no type")})},
		{"append with a cancelled context", live, context.Canceled, func() error {
			_, err := s.Append(cancelled, live, varve.Any, events("E", 1)...)
			return err
		}},
		{"read of a missing stream", missing, varve.ErrStreamNotFound, read(missing)},
		{"read of a tombstone", tomb, varve.ErrStreamDeleted, read(tomb)},
		{"info of a missing stream", missing, varve.ErrStreamNotFound, func() error {
			_, err := s.StreamInfo(ctx, missing)
			return err
		}},
		{"truncate of a missing stream", missing, varve.ErrStreamNotFound, func() error { return s.Truncate(ctx, missing, 2) }},
		{"truncate of a tombstone", tomb, varve.ErrStreamDeleted, func() error { return s.Truncate(ctx, tomb, 2) }},
		{"delete of a missing stream", missing, varve.ErrStreamNotFound, func() error { return s.Delete(ctx, missing, varve.StreamExists) }},
		{"delete at a wrong version", live, varve.ErrWrongExpectedVersion, func() error { return s.Delete(ctx, live, varve.Exact(9)) }},
		{"delete of a tombstone", tomb, varve.ErrStreamDeleted, func() error { return s.Delete(ctx, tomb, varve.Any) }},
		{"tombstone at a wrong version", live, varve.ErrWrongExpectedVersion, func() error { return s.Tombstone(ctx, live, varve.Exact(9)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if n := strings.Count(err.Error(), tc.stream); n != 1 || !strings.Contains(err.Error(), strconv.Quote(tc.stream)) {
				t.Errorf("the error names stream %q %d times, want once, quoted: %s", tc.stream, n, err)
			}
			if id := known[0].ID.String(); strings.Count(err.Error(), id) > 1 {
				t.Errorf("the error names event %s more than once: %s", id, err)
			}
		})
	}
}
