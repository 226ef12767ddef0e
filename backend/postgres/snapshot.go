package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
)

// SaveSnapshot replaces the stream's snapshot.
func (b *Backend) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	if s.Version > math.MaxInt64 || s.SchemaVersion > math.MaxInt32 || s.SchemaVersion < math.MinInt32 {
		return fmt.Errorf("postgres: version %d or schema version %d out of range: %w", s.Version, s.SchemaVersion, varve.ErrInvalidArgument)
	}
	b.requests.Add(1)
	_, err := b.pool.Exec(ctx, b.sql.saveSnapshot, s.Stream, int64(s.Version), int32(s.SchemaVersion), s.Data, s.TakenAt)
	if err != nil {
		return b.fail(ctx, err)
	}
	return nil
}

// LoadSnapshot returns the stream's snapshot; ok is false if there is none.
func (b *Backend) LoadSnapshot(ctx context.Context, stream string) (varve.Snapshot, bool, error) {
	if err := b.begin(ctx); err != nil {
		return varve.Snapshot{}, false, err
	}
	var (
		version int64
		schema  int32
		data    []byte
		taken   time.Time
	)
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, b.sql.loadSnapshot, stream).Scan(&version, &schema, &data, &taken)
	if errors.Is(err, pgx.ErrNoRows) {
		return varve.Snapshot{}, false, nil
	}
	if err != nil {
		return varve.Snapshot{}, false, b.fail(ctx, err)
	}
	return varve.Snapshot{Stream: stream, Version: varve.Version(version), SchemaVersion: int(schema), Data: data, TakenAt: taken}, true, nil
}

// SaveCheckpoint stores pos under name. Positions are stored as two bigints
// holding the bits of the uint64 halves.
func (b *Backend) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	b.requests.Add(1)
	if _, err := b.pool.Exec(ctx, b.sql.saveCheckpoint, name, int64(pos.Commit), int64(pos.Seq)); err != nil {
		return b.fail(ctx, err)
	}
	return nil
}

// LoadCheckpoint returns the position saved under name.
func (b *Backend) LoadCheckpoint(ctx context.Context, name string) (varve.Position, bool, error) {
	if err := b.begin(ctx); err != nil {
		return varve.Position{}, false, err
	}
	var commit, seq int64
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, b.sql.loadCheckpoint, name).Scan(&commit, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return varve.Position{}, false, nil
	}
	if err != nil {
		return varve.Position{}, false, b.fail(ctx, err)
	}
	return varve.Position{Commit: uint64(commit), Seq: uint64(seq)}, true, nil
}
