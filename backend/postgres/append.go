package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/varve-go/varve"
)

// SQLSTATEs raised by the schema's functions.
const (
	codeWrongVersion = "VV001"
	codeDuplicate    = "VV002"
	codeTombstoned   = "VV003"
	codeNotFound     = "VV004"
	codeUnique       = "23505"
)

// appendArgs are the column arrays of one append, pooled.
type appendArgs struct {
	ids   [][16]byte
	types []string
	data  [][]byte
	meta  [][]byte
}

var argsPool = sync.Pool{New: func() any { return new(appendArgs) }}

func (a *appendArgs) fill(evs []varve.Event) {
	a.ids, a.types, a.data, a.meta = a.ids[:0], a.types[:0], a.data[:0], a.meta[:0]
	for i := range evs {
		e := &evs[i]
		a.ids = append(a.ids, e.ID)
		a.types = append(a.types, e.Type)
		a.data = append(a.data, e.Data)
		a.meta = append(a.meta, e.Metadata)
	}
}

func (a *appendArgs) release() {
	if cap(a.ids) > 1024 {
		return
	}
	clear(a.types)
	clear(a.data)
	clear(a.meta)
	argsPool.Put(a)
}

// Append writes the events in one statement: the schema's append function
// locks the stream, handles idempotent retries, checks the expected version
// and inserts the events, all in the statement's implicit transaction.
func (b *Backend) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	if err := b.begin(ctx); err != nil {
		return varve.AppendResult{}, fmt.Errorf("postgres: append to %q: %w", req.Stream, err)
	}
	args := argsPool.Get().(*appendArgs)
	args.fill(req.Events)
	var first, last, tx, seq int64
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, b.sql.append, req.Stream, int64(req.Expected),
		args.ids, args.types, args.data, args.meta).Scan(&first, &last, &tx, &seq)
	args.release()
	if err != nil {
		return varve.AppendResult{}, b.mapError(ctx, "append to "+strconv.Quote(req.Stream), req.Stream, req.Expected, err)
	}
	b.committed()
	return varve.AppendResult{
		FirstVersion: varve.Version(first),
		LastVersion:  varve.Version(last),
		Position:     varve.Position{Commit: uint64(tx), Seq: uint64(seq)},
	}, nil
}

// mapError turns the errors raised by the schema's functions into varve's
// sentinels.
func (b *Backend) mapError(ctx context.Context, what, stream string, expected varve.ExpectedVersion, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == codeWrongVersion:
			actual, perr := strconv.ParseUint(pg.Detail, 10, 64)
			if perr != nil {
				return fmt.Errorf("postgres: %s: bad conflict detail %q: %w", what, pg.Detail, err)
			}
			return fmt.Errorf("postgres: %s: %w", what, &varve.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: actual})
		case pg.Code == codeDuplicate, pg.Code == codeUnique && pg.ConstraintName == "events_stream_id":
			return fmt.Errorf("postgres: %s: %w", what, varve.ErrDuplicateEvent)
		case pg.Code == codeTombstoned:
			return fmt.Errorf("postgres: %s: %w", what, varve.ErrStreamDeleted)
		case pg.Code == codeNotFound:
			return fmt.Errorf("postgres: %s: %w", what, varve.ErrStreamNotFound)
		}
	}
	return b.fail(ctx, what, err)
}
