// Package sqliteprojection runs projections exactly once on SQLite: the
// handler writes its read model in a *sql.Tx in which the projection's
// checkpoint is saved too, so that both commit or neither does. A crash, a
// cancelled context or a storage error at any point leaves the read model
// equal to the fold of the events up to the checkpoint, without asking for
// idempotent handlers.
//
// The transaction is one of the backend's writer ([sqlite.Backend.WriteTx]):
// a savepoint in a group commit, serialised with the store's appends, so
// the read model lives in the store's database file and a batch costs no
// sync of its own when appends are flowing. The checkpoint is a row of the
// backend's checkpoints table under [projection.CheckpointName], the row
// [varve.Store.Checkpoints] reads, so that a [projection.Runner] resumes
// from it. A handler picks its table by [projection.Batch.Version] to
// rebuild a new version beside the old one; [sqlite.Backend.ReadTx] reads a
// read model and its checkpoint as of one commit.
//
// The transaction reads the checkpoint before it writes: the handler gets
// only the events of the batch past it, and the checkpoint only moves
// forward. When a batch is tried again after its commit was acknowledged
// late (a cancelled context returns before the writer commits), possibly
// with other bounds, or two runners of the same version race, no event is
// applied twice; a batch wholly at or before the checkpoint rolls back with
// [ErrAlreadyApplied] and the runner moves on.
//
// A parked event that the runner applies again on an operator's request
// ([projection.ReplayParked], a batch with Parked set) is behind the
// checkpoint: the transaction applies it without that check and leaves the
// checkpoint as it is. Such a replay is at-least-once: a crash between its
// commit and the event's resolution applies it again at the next request.
//
// # Durability
//
// With [sqlite.SyncFull] a committed batch survives a crash of the process
// and a loss of power. With [sqlite.SyncNormal] it survives a crash of the
// process; a power loss may undo the last commits, read model and checkpoint
// together, so the projection applies those batches again from an earlier
// checkpoint: still exactly once.
package sqliteprojection

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/sqlite"
	"github.com/varve-go/varve/projection"
)

// Handler applies a batch to a read model inside tx. It must not commit or
// roll back tx, and must not write to the store (it runs on the store's
// writer).
type Handler func(ctx context.Context, tx *sql.Tx, b projection.Batch) error

// ErrAlreadyApplied is returned when the checkpoint is already at or past
// the batch: an earlier attempt whose commit was acknowledged late, or
// another runner of the same version, applied it. It is
// [projection.ErrApplied]: the runner counts the batch as handled.
var ErrAlreadyApplied = projection.ErrApplied

// Backend returns the SQLite backend of store, looking through wrappers
// ([varve.Unwrapper]).
func Backend(store *varve.Store) (*sqlite.Backend, error) {
	if store == nil {
		return nil, fmt.Errorf("sqliteprojection: nil store: %w", varve.ErrInvalidArgument)
	}
	for b := store.Backend(); b != nil; {
		if sb, ok := b.(*sqlite.Backend); ok {
			return sb, nil
		}
		u, ok := b.(varve.Unwrapper)
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return nil, fmt.Errorf("sqliteprojection: the store's backend is not SQLite: %w", varve.ErrNotSupported)
}

// Commit returns a [projection.CommitFunc] that runs h and saves the
// checkpoint in one write transaction of the store's SQLite backend.
func Commit(store *varve.Store, h Handler) (projection.CommitFunc, error) {
	if h == nil {
		return nil, fmt.Errorf("sqliteprojection: nil handler: %w", varve.ErrInvalidArgument)
	}
	b, err := Backend(store)
	if err != nil {
		return nil, err
	}
	return commitFunc(b, h), nil
}

// Projection returns p with its Commit set to run h transactionally.
func Projection(store *varve.Store, p projection.Projection, h Handler) (projection.Projection, error) {
	c, err := Commit(store, h)
	if err != nil {
		return p, err
	}
	p.Handle, p.Commit = nil, c
	return p, nil
}

func commitFunc(b *sqlite.Backend, h Handler) projection.CommitFunc {
	return func(ctx context.Context, checkpoint string, batch projection.Batch) error {
		applied := false
		err := b.WriteTx(ctx, func(tx *sql.Tx) error {
			if batch.Parked {
				// A parked event applied again: behind the checkpoint,
				// which stays where it is.
				return h(ctx, tx, batch)
			}
			cp, _, err := sqlite.CheckpointTx(ctx, tx, checkpoint)
			if err != nil {
				return err
			}
			// Events at or before the checkpoint are in the read model
			// already: a batch of an earlier attempt, with other bounds,
			// committed after its caller gave up on it, or another runner's.
			evs := batch.Events
			for len(evs) > 0 && !cp.Less(evs[0].Position) {
				evs = evs[1:]
			}
			if !cp.Less(batch.Through) {
				applied = len(batch.Events) > 0
				return errNothing
			}
			if _, err := sqlite.AdvanceCheckpoint(ctx, tx, checkpoint, batch.Through); err != nil {
				return err
			}
			if len(evs) == 0 {
				return nil
			}
			batch.Events = evs
			return h(ctx, tx, batch)
		})
		switch {
		case err == errNothing && applied:
			return fmt.Errorf("sqliteprojection: checkpoint %q at %v: %w", checkpoint, batch.Through, ErrAlreadyApplied)
		case err == errNothing:
			return nil // an empty batch that moves nothing
		case err != nil:
			return fmt.Errorf("sqliteprojection: %w", err)
		}
		return nil
	}
}

// errNothing rolls back a transaction that has nothing to commit.
var errNothing = errors.New("sqliteprojection: nothing to commit")

// DeleteErased deletes, in tx, the rows of table whose column holds the
// subject of an erasure report of b ([projection.Batch.Erasures], for a
// projection with Erasures), and tells the runner how many
// ([projection.Batch.Erased]). table and column are SQL text, the
// handler's own names (quoted as it needs). The deletion runs with PRAGMA
// secure_delete, so SQLite overwrites the rows' bytes in the pages it
// writes. It returns the rows deleted. The store's
// database overwrites deleted content (secure_delete) only where the
// backend's documentation says so: docs/privacy.md.
func DeleteErased(ctx context.Context, tx *sql.Tx, b projection.Batch, table, column string) (int64, error) {
	reports := b.Erasures()
	if len(reports) == 0 {
		return 0, nil
	}
	stmt := "DELETE FROM " + table + " WHERE " + column + " = ?"
	var was int
	if err := tx.QueryRowContext(ctx, "PRAGMA secure_delete").Scan(&was); err != nil {
		return 0, fmt.Errorf("sqliteprojection: secure_delete: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "PRAGMA secure_delete = ON"); err != nil {
		return 0, fmt.Errorf("sqliteprojection: secure_delete: %w", err)
	}
	defer func() { _, _ = tx.ExecContext(context.WithoutCancel(ctx), "PRAGMA secure_delete = "+strconv.Itoa(was)) }()
	var all int64
	for _, r := range reports {
		res, err := tx.ExecContext(ctx, stmt, r.Subject)
		if err != nil {
			return all, fmt.Errorf("sqliteprojection: delete the rows of erased subject %q from %s: %w", r.Subject, table, err)
		}
		n, _ := res.RowsAffected()
		b.Erased(r, n)
		all += n
	}
	return all, nil
}
