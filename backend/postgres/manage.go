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

// StandbyStatus is how far a hot standby has replayed the primary's WAL.
type StandbyStatus struct {
	// Standby is false when the server is not in recovery (a primary, or
	// a standby promoted since); the other fields are then zero.
	Standby bool
	// ReceiveLSN and ReplayLSN are the WAL positions the standby has
	// received and replayed (pg_last_wal_receive_lsn,
	// pg_last_wal_replay_lsn), as PostgreSQL prints them.
	ReceiveLSN, ReplayLSN string
	// ReplayedCommit is the commit time, on the primary, of the last
	// transaction the standby replayed (pg_last_xact_replay_timestamp);
	// zero before the first.
	ReplayedCommit time.Time
	// SinceReplayedCommit is the server's now() minus ReplayedCommit. It
	// is the replay lag while the primary commits, and grows when the
	// primary is idle, so read it with the primary's activity in mind.
	SinceReplayedCommit time.Duration
}

// StandbyStatus reports the server's replay of the primary's WAL. On a
// primary it returns a status with Standby false.
func (b *Backend) StandbyStatus(ctx context.Context) (StandbyStatus, error) {
	if err := b.begin(ctx); err != nil {
		return StandbyStatus{}, err
	}
	b.requests.Add(1)
	var (
		st              StandbyStatus
		receive, replay *string
		replayedAt      *time.Time
		sinceMicros     *int64
	)
	err := b.pool.QueryRow(ctx, `SELECT pg_is_in_recovery(), pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text,
       pg_last_xact_replay_timestamp(),
       (extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1e6)::bigint`).
		Scan(&st.Standby, &receive, &replay, &replayedAt, &sinceMicros)
	if err != nil {
		return StandbyStatus{}, b.fail(ctx, fmt.Errorf("standby status: %w", err))
	}
	if !st.Standby {
		return StandbyStatus{}, nil
	}
	if receive != nil {
		st.ReceiveLSN = *receive
	}
	if replay != nil {
		st.ReplayLSN = *replay
	}
	if replayedAt != nil {
		st.ReplayedCommit = *replayedAt
	}
	if sinceMicros != nil {
		st.SinceReplayedCommit = time.Duration(*sinceMicros) * time.Microsecond
	}
	return st, nil
}
