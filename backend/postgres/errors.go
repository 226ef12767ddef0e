package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/varve-go/varve"
)

// ErrStandby is in the error of a write (append, delete, truncate, a
// snapshot or checkpoint save) sent to a hot standby, which only reads, and
// of New when the schema does not exist on the standby (create it on the
// primary: New does not migrate a standby).
var ErrStandby = errors.New("postgres: the server is a read-only hot standby")

// SQLSTATEs raised by the schema's functions.
const (
	codeReadOnly     = "25006" // read_only_sql_transaction: a write on a standby
	codeWrongVersion = "VV001"
	codeDuplicate    = "VV002"
	codeTombstoned   = "VV003"
	codeNotFound     = "VV004"
	codeChanged      = "VV005" // the stream's row changed under a compare-and-set
	codeUnique       = "23505"
	codeDeadlock     = "40P01"
)

// fail turns an error of a statement into what the seam promises: the
// context's error when it ended, ErrClosed after Close, ErrInvalidArgument
// when the server refused the request's bytes or sizes; otherwise the
// server's or the driver's words. The Store names the operation and the
// stream.
func (b *Backend) fail(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if b.closed.Load() {
		return varve.ErrClosed
	}
	if refusedInput(err) {
		return fmt.Errorf("postgres: %w: %w", err, varve.ErrInvalidArgument)
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == codeReadOnly {
		return fmt.Errorf("%w: %w", ErrStandby, err)
	}
	return fmt.Errorf("postgres: %w", err)
}

// refusedInput reports whether err says that the request's data broke one
// of PostgreSQL's rules or limits rather than that something failed: text
// that is not valid in the database's encoding (a NUL, SQLSTATE 22021,
// 22P05), a value over a limit (class 54: an index row too large, ...), or
// a message over the protocol's 1 GiB (pgx refuses to send it).
func refusedInput(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "22021" || pg.Code == "22P05" || strings.HasPrefix(pg.Code, "54")
	}
	return strings.Contains(err.Error(), "message body too large")
}

// mapError turns the errors raised by the schema's functions into varve's
// sentinels, which carry no words of this backend's.
func (b *Backend) mapError(ctx context.Context, stream string, expected varve.ExpectedVersion, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == codeWrongVersion:
			actual, perr := strconv.ParseUint(pg.Detail, 10, 64)
			if perr != nil {
				return fmt.Errorf("postgres: version conflict without a version (detail %q): %w", pg.Detail, err)
			}
			return &varve.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: actual}
		case pg.Code == codeDuplicate, pg.Code == codeUnique && pg.ConstraintName == "events_stream_id":
			return varve.ErrDuplicateEvent
		case pg.Code == codeTombstoned:
			return varve.ErrStreamDeleted
		case pg.Code == codeNotFound:
			return varve.ErrStreamNotFound
		}
	}
	if cerr := ctx.Err(); cerr == nil && !b.closed.Load() && lostInFlight(err) {
		// The server went away (a crash, a fail-over): the pool's other
		// connections to it would fail the same way, one call each, so they
		// are closed and the next call dials again (to the new primary, with
		// a multi-host URL and target_session_attrs=read-write).
		b.pool.Reset()
		return fmt.Errorf("postgres: %w: the connection failed after the write was sent: %w", varve.ErrUnknownOutcome, err)
	}
	return b.fail(ctx, err)
}

// settled returns ErrUnknownOutcome when a write's statement succeeded
// after its context ended. The cancel request that the context's end sent
// may have cut short the commit's wait for a synchronous standby:
// PostgreSQL then reports success (with a warning) for a commit made only
// on the primary, which a fail-over loses.
func settled(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: %w: the call's context ended while its commit was in flight, which cuts short a wait for a synchronous standby: %w", varve.ErrUnknownOutcome, err)
	}
	return nil
}

// lostInFlight reports whether err says that the connection failed while a
// write was on its way or waiting for its answer, so that the server may
// have committed it: an I/O error after the statement was sent (pgconn
// does not call it safe to retry), or the server ending the session
// (SQLSTATE class 08, or 57P01-57P03: a shutdown or crash, which can come
// after the commit was made locally, while it waited for a synchronous
// standby). A failure to connect sent nothing.
func lostInFlight(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return strings.HasPrefix(pg.Code, "08") || pg.Code == "57P01" || pg.Code == "57P02" || pg.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	return !refusedInput(err)
}

// isRace reports whether err says that another writer changed the
// stream's row under the statement (VV005), created the stream first (a
// unique violation of its row or of a version) or deadlocked with it: the
// statement can be run again.
func isRace(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return false
	}
	return pg.Code == codeDeadlock || pg.Code == codeChanged ||
		pg.Code == codeUnique && (pg.ConstraintName == "streams_pkey" || pg.ConstraintName == "events_stream_version")
}
