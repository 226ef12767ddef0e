package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/varve-go/varve"
)

// TestErrorsNameStreamOnce: the Store names the operation and the stream;
// the backend adds nothing to its sentinels, so each error names the
// stream once and says "postgres" nowhere.
func TestErrorsNameStreamOnce(t *testing.T) {
	b := open(t, config(t, testSchema))
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stream := fmt.Sprintf("errors-%d", time.Now().UnixNano())
	ev := varve.Event{ID: varve.NewEventID(), Type: "E"}
	if _, err := s.Append(ctx, stream, varve.NoStream, ev); err != nil {
		t.Fatal(err)
	}
	tomb := stream + "-tomb"
	if _, err := s.Append(ctx, tomb, varve.NoStream, varve.Event{Type: "E"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Tombstone(ctx, tomb, varve.Any); err != nil {
		t.Fatal(err)
	}
	missing := stream + "-missing"
	for _, tc := range []struct {
		name   string
		stream string
		target error
		op     func() error
	}{
		{"conflict", stream, varve.ErrWrongExpectedVersion, func() error {
			_, err := s.Append(ctx, stream, varve.NoStream, varve.Event{Type: "E"})
			return err
		}},
		{"duplicate id", stream, varve.ErrDuplicateEvent, func() error {
			_, err := s.Append(ctx, stream, varve.Any, varve.Event{Type: "E"}, ev)
			return err
		}},
		{"append to a tombstone", tomb, varve.ErrStreamDeleted, func() error {
			_, err := s.Append(ctx, tomb, varve.Any, varve.Event{Type: "E"})
			return err
		}},
		{"read a missing stream", missing, varve.ErrStreamNotFound, func() error {
			for _, err := range s.ReadStream(ctx, missing) {
				return err
			}
			return nil
		}},
		{"stream info of a missing stream", missing, varve.ErrStreamNotFound, func() error {
			_, err := s.StreamInfo(ctx, missing)
			return err
		}},
		{"truncate a missing stream", missing, varve.ErrStreamNotFound, func() error { return s.Truncate(ctx, missing, 2) }},
		{"delete at a wrong version", stream, varve.ErrWrongExpectedVersion, func() error { return s.Delete(ctx, stream, varve.Exact(7)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			if !errors.Is(err, tc.target) {
				t.Fatalf("got %v, want %v", err, tc.target)
			}
			if n := strings.Count(err.Error(), tc.stream); n != 1 || strings.Contains(err.Error(), "postgres") {
				t.Fatalf("error %q names the stream %d times or says postgres", err, n)
			}
		})
	}
}

// TestRefusedInput: what PostgreSQL refuses in a request's bytes or sizes
// is ErrInvalidArgument, with the server's words, whatever slipped past the
// Store's checks (the backend is called directly here).
func TestRefusedInput(t *testing.T) {
	b := open(t, config(t, testSchema))
	ctx := context.Background()
	// Over btree's 2704 bytes per index row, and not compressible.
	long := make([]byte, 2000)
	_, _ = rand.Read(long)
	for _, tc := range []struct {
		name, stream, typ, code string
	}{
		{"NUL in a stream id", "nul\x00id", "E", "22021"},
		{"NUL in a type", "nul-type", "E\x00", "22021"},
		{"invalid UTF-8", "bad-\xff\xfe", "E", "22021"},
		{"stream id over the index limit", hex.EncodeToString(long), "E", "54000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Append(ctx, varve.AppendRequest{Stream: tc.stream, Expected: varve.Any,
				Events: []varve.Event{{ID: varve.NewEventID(), Type: tc.typ}}})
			var pg *pgconn.PgError
			if !errors.Is(err, varve.ErrInvalidArgument) || !errors.As(err, &pg) || pg.Code != tc.code {
				t.Fatalf("append: %v, want ErrInvalidArgument with SQLSTATE %s", err, tc.code)
			}
			_, err = b.ReadStream(ctx, varve.StreamQuery{Stream: tc.stream, Limit: 1}, nil)
			if tc.code == "22021" && tc.typ == "E" && !errors.Is(err, varve.ErrInvalidArgument) {
				t.Fatalf("read: %v, want ErrInvalidArgument", err)
			}
		})
	}
}
