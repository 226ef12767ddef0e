package postgres

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
)

// StreamInfo reads the stream's row.
func (b *Backend) StreamInfo(ctx context.Context, stream string) (varve.StreamInfo, error) {
	if err := b.begin(ctx); err != nil {
		return varve.StreamInfo{}, err
	}
	var (
		version, tx, seq    int64
		deleted, tombstoned bool
		created, updated    time.Time
	)
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, b.sql.streamInfo, stream).Scan(&version, &tx, &seq, &deleted, &tombstoned, &created, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return varve.StreamInfo{}, varve.ErrStreamNotFound
	}
	if err != nil {
		return varve.StreamInfo{}, b.fail(ctx, err)
	}
	return varve.StreamInfo{
		Stream:       stream,
		Version:      varve.Version(version),
		LastPosition: varve.Position{Commit: uint64(tx), Seq: uint64(seq)},
		CreatedAt:    created,
		UpdatedAt:    updated,
		Deleted:      deleted,
		Tombstoned:   tombstoned,
	}, nil
}

// Truncate deletes the stream's events below before under the stream's lock.
func (b *Backend) Truncate(ctx context.Context, stream string, before varve.Version) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	if before > math.MaxInt64 {
		before = math.MaxInt64
	}
	return b.retryRace(func() error {
		b.requests.Add(1)
		if _, err := b.pool.Exec(ctx, b.sql.truncate, stream, int64(before)); err != nil {
			return b.mapError(ctx, stream, varve.Any, err)
		}
		return nil
	})
}

// Delete deletes or tombstones the stream in one statement.
func (b *Backend) Delete(ctx context.Context, stream string, expected varve.ExpectedVersion, tombstone bool) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	err := b.retryRace(func() error {
		b.requests.Add(1)
		if _, err := b.pool.Exec(ctx, b.sql.delete, stream, int64(expected), tombstone); err != nil {
			return b.mapError(ctx, stream, expected, err)
		}
		return nil
	})
	if err == nil {
		b.committed()
	}
	return err
}

// retryRace runs a stream mutation again when it lost a race to create the
// stream's row (see isRace).
func (b *Backend) retryRace(run func() error) error {
	for attempt := 0; ; attempt++ {
		err := run()
		if !isRace(err) || attempt == maxRaceRetries {
			return err
		}
	}
}
