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
// The transaction takes a lock on the checkpoint's name (an advisory
// transaction lock) and reads the checkpoint before it writes: the handler
// gets only the events of the batch past it, and the checkpoint only moves
// forward. When a batch is tried again after its commit was acknowledged
// late, possibly with other bounds (another page size), or two runners of
// the same version race, no event is applied twice; a batch wholly at or
// before the checkpoint rolls back with [ErrAlreadyApplied] and the runner
// moves on. Run one runner per version (say with a lease) all the same: a
// second one only repeats the reads.
//
// A parked event that the runner applies again on an operator's request
// ([projection.ReplayParked], a batch with Parked set) is behind the
// checkpoint: the transaction applies it without that check and leaves the
// checkpoint as it is. Such a replay is at-least-once: a crash between its
// commit and the event's resolution applies it again at the next request.
package pgprojection

import (
	"context"
	"errors"
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
	// The checkpoint is read and moved to the batch's end in one statement
	// (the CTE reads the row as it was before the upsert): a batch that
	// turns out to be applied already, or whose handler fails, rolls back.
	advance := `WITH old AS (SELECT commit_pos, seq_pos FROM ` + schema + `.checkpoints WHERE name = $1),
up AS (INSERT INTO ` + schema + `.checkpoints AS c (name, commit_pos, seq_pos) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET commit_pos = EXCLUDED.commit_pos, seq_pos = EXCLUDED.seq_pos, updated_at = now()
WHERE (c.commit_pos, c.seq_pos) < (EXCLUDED.commit_pos, EXCLUDED.seq_pos))
SELECT commit_pos, seq_pos FROM old`
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
		// One committer of a checkpoint at a time, also before its row
		// exists; the checkpoint is read and advanced after the lock is
		// held. Both go in one round trip.
		var c, q int64
		batch := &pgx.Batch{}
		batch.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "varve:"+schema+":"+checkpoint)
		if b.Parked {
			// A parked event applied again: behind the checkpoint, which
			// stays where it is.
			if err := tx.SendBatch(ctx, batch).Close(); err != nil {
				return fmt.Errorf("pgprojection: lock checkpoint %q: %w", checkpoint, err)
			}
			if err := h(ctx, tx, b); err != nil {
				return err
			}
			if err := tx.Commit(ctx); err != nil {
				return fmt.Errorf("pgprojection: commit: %w", err)
			}
			return nil
		}
		batch.Queue(advance, checkpoint, int64(b.Through.Commit), int64(b.Through.Seq))
		br := tx.SendBatch(ctx, batch)
		_, err = br.Exec()
		if err == nil {
			if err = br.QueryRow().Scan(&c, &q); errors.Is(err, pgx.ErrNoRows) {
				err = nil
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pgprojection: lock and advance checkpoint %q: %w", checkpoint, err)
		}
		cp := varve.Position{Commit: uint64(c), Seq: uint64(q)}
		if !cp.Less(b.Through) {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			if len(b.Events) == 0 {
				return nil // an empty batch that moves nothing
			}
			return fmt.Errorf("pgprojection: checkpoint %q at %v: %w", checkpoint, b.Through, ErrAlreadyApplied)
		}
		// Events at or before the checkpoint are in the read model already:
		// a batch of an earlier attempt, with other bounds, whose commit
		// landed after its caller gave up on it, or another runner's.
		evs := b.Events
		for len(evs) > 0 && !cp.Less(evs[0].Position) {
			evs = evs[1:]
		}
		if len(evs) > 0 {
			b.Events = evs
			if err := h(ctx, tx, b); err != nil {
				return err
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("pgprojection: commit: %w", err)
		}
		return nil
	}
}

// DeleteErased deletes, in tx, the rows of table whose column holds the
// subject of an erasure report of b ([projection.Batch.Erasures], for a
// projection with Erasures), and tells the runner how many
// ([projection.Batch.Erased]). table and column are SQL text, the
// handler's own names (schema-qualified and quoted as it needs). It
// returns the rows deleted. PostgreSQL keeps a deleted row's bytes in
// the table's dead tuples and in the WAL until VACUUM and the recycling of
// the WAL: docs/privacy.md.
func DeleteErased(ctx context.Context, tx pgx.Tx, b projection.Batch, table, column string) (int64, error) {
	reports := b.Erasures()
	if len(reports) == 0 {
		return 0, nil
	}
	stmt := "DELETE FROM " + table + " WHERE " + column + " = $1"
	var all int64
	for _, r := range reports {
		tag, err := tx.Exec(ctx, stmt, r.Subject)
		if err != nil {
			return all, fmt.Errorf("pgprojection: delete the rows of erased subject %q from %s: %w", r.Subject, table, err)
		}
		b.Erased(r, tag.RowsAffected())
		all += tag.RowsAffected()
	}
	return all, nil
}
