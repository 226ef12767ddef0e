// Package pgprojection runs projections exactly once on PostgreSQL: the
// handler writes its read model in a pgx transaction in which the
// projection's checkpoint is saved too, so that both commit or neither
// does. A crash, a cancelled context or a lost connection at any point
// leaves the read model equal to the fold of the events up to the
// checkpoint, without asking for idempotent handlers.
//
// The checkpoint is a row of the backend's own checkpoints table
// (<schema>.checkpoints), under [projection.CheckpointName]: the same row
// [varve.Store.Checkpoints] reads, so that a [projection.Runner] resumes
// from it. The read model's tables must live in the same database as the
// store (any schema); a handler picks its table by [projection.Batch.Version]
// to rebuild a new version beside the old one.
//
// The save only moves the checkpoint forward: when a batch's commit was
// acknowledged late and the batch is tried again, or two runners of the
// same version race, the later commit finds the checkpoint at or past the
// batch and rolls back with [ErrAlreadyApplied], so that no batch is
// applied twice; the runner moves on. Run one runner per version (say with
// a lease) all the same: a second one only repeats the reads.
package pgprojection

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/projection"
)

// Handler applies a batch to a read model inside tx. It must not commit or
// roll back tx.
type Handler func(ctx context.Context, tx pgx.Tx, b projection.Batch) error

// ErrAlreadyApplied is returned when the checkpoint is already at or past
// the batch: an earlier attempt whose commit was acknowledged late, or
// another runner of the same version, applied it. It is
// [projection.ErrApplied]: the runner counts the batch as handled.
var ErrAlreadyApplied = projection.ErrApplied

// Backend returns the PostgreSQL backend of store, looking through
// wrappers ([varve.Unwrapper]).
func Backend(store *varve.Store) (*postgres.Backend, error) {
	for b := store.Backend(); b != nil; {
		if pb, ok := b.(*postgres.Backend); ok {
			return pb, nil
		}
		u, ok := b.(varve.Unwrapper)
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return nil, fmt.Errorf("pgprojection: the store's backend is not PostgreSQL: %w", varve.ErrNotSupported)
}

// Commit returns a [projection.CommitFunc] that runs h and saves the
// checkpoint in one transaction of the store's PostgreSQL backend.
func Commit(store *varve.Store, h Handler) (projection.CommitFunc, error) {
	b, err := Backend(store)
	if err != nil {
		return nil, err
	}
	return commitFunc(b.Pool(), b.Schema(), h), nil
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

func commitFunc(pool *pgxpool.Pool, schema string, h Handler) projection.CommitFunc {
	save := `INSERT INTO ` + schema + `.checkpoints AS c (name, commit_pos, seq_pos) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET commit_pos = EXCLUDED.commit_pos, seq_pos = EXCLUDED.seq_pos, updated_at = now()
WHERE (c.commit_pos, c.seq_pos) < (EXCLUDED.commit_pos, EXCLUDED.seq_pos)`
	return func(ctx context.Context, checkpoint string, b projection.Batch) (err error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return fmt.Errorf("pgprojection: begin: %w", err)
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback(context.WithoutCancel(ctx))
			}
		}()
		if len(b.Events) > 0 {
			if err := h(ctx, tx, b); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, save, checkpoint, int64(b.Through.Commit), int64(b.Through.Seq))
		if err != nil {
			return fmt.Errorf("pgprojection: save checkpoint %q: %w", checkpoint, err)
		}
		if tag.RowsAffected() == 0 {
			if len(b.Events) == 0 {
				// An empty batch that moves nothing.
				_ = tx.Rollback(context.WithoutCancel(ctx))
				return nil
			}
			return fmt.Errorf("pgprojection: checkpoint %q at %v: %w", checkpoint, b.Through, ErrAlreadyApplied)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("pgprojection: commit: %w", err)
		}
		return nil
	}
}
