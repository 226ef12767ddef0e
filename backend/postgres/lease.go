package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
)

// AcquireLease implements varve.LeaseStore in one statement that judges
// expiry by the server's clock: it takes a free or expired lease with the
// next token, renews the holder's own, and leaves another's alone.
func (b *Backend) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (varve.Lease, error) {
	if err := b.begin(ctx); err != nil {
		return varve.Lease{}, err
	}
	acquire := `INSERT INTO ` + b.schema + `.leases AS l (name, holder, token, expires)
VALUES ($1, $2, 1, now() + $3 * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires,
    token = CASE WHEN l.holder = EXCLUDED.holder AND l.expires > now() THEN l.token ELSE l.token + 1 END
 WHERE l.holder = EXCLUDED.holder OR l.holder = '' OR l.expires <= now()
RETURNING l.token, l.expires`
	for attempt := 0; ; attempt++ {
		var token int64
		var expires time.Time
		b.requests.Add(1)
		err := b.pool.QueryRow(ctx, acquire, name, holder, ttl.Microseconds()).Scan(&token, &expires)
		if err == nil {
			return varve.Lease{Name: name, Holder: holder, Token: uint64(token), Expires: expires}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return varve.Lease{}, b.fail(ctx, err)
		}
		var other string
		var live bool
		b.requests.Add(1)
		err = b.pool.QueryRow(ctx, `SELECT holder, expires, expires > now() FROM `+b.schema+`.leases WHERE name = $1`, name).Scan(&other, &expires, &live)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return varve.Lease{}, b.fail(ctx, err)
		}
		if err == nil && live && other != "" || attempt > 3 {
			return varve.Lease{}, &varve.LeaseHeldError{Holder: other, Expires: expires}
		}
		// Released or expired between the two statements: try again.
	}
}

// ReleaseLease implements varve.LeaseStore.
func (b *Backend) ReleaseLease(ctx context.Context, name, holder string, token uint64) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	b.requests.Add(1)
	_, err := b.pool.Exec(ctx, `UPDATE `+b.schema+`.leases SET holder = '', expires = now() WHERE name = $1 AND holder = $2 AND token = $3`,
		name, holder, clamp(token))
	if err != nil {
		return b.fail(ctx, err)
	}
	return nil
}

// SaveCheckpointFenced implements varve.LeaseStore: the lease's row is
// read FOR SHARE, so a new holder's acquire waits for the save to commit
// and then reads it.
func (b *Backend) SaveCheckpointFenced(ctx context.Context, name string, pos varve.Position, lease string, token uint64) error {
	if err := b.begin(ctx); err != nil {
		return err
	}
	save := `WITH l AS (SELECT token FROM ` + b.schema + `.leases WHERE name = $4 FOR SHARE)
INSERT INTO ` + b.schema + `.checkpoints (name, commit_pos, seq_pos)
SELECT $1, $2, $3 WHERE coalesce((SELECT token FROM l), 0) <= $5
ON CONFLICT (name) DO UPDATE SET commit_pos = EXCLUDED.commit_pos, seq_pos = EXCLUDED.seq_pos, updated_at = now()
RETURNING 1`
	var one int
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, save, name, clamp(pos.Commit), clamp(pos.Seq), lease, clamp(token)).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return varve.ErrLeaseLost
	case err != nil:
		return b.fail(ctx, err)
	}
	return nil
}

// ListLeases implements varve.LeaseStore, judging expiry by the server's
// clock.
func (b *Backend) ListLeases(ctx context.Context, prefix string) ([]varve.Lease, error) {
	if err := b.begin(ctx); err != nil {
		return nil, err
	}
	b.requests.Add(1)
	rows, err := b.pool.Query(ctx, `SELECT name, holder, token, expires FROM `+b.schema+`.leases
 WHERE left(name, length($1)) = $1 AND holder <> '' AND expires > now() ORDER BY name COLLATE "C"`, prefix)
	if err != nil {
		return nil, b.fail(ctx, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (varve.Lease, error) {
		var l varve.Lease
		var token int64
		err := r.Scan(&l.Name, &l.Holder, &token, &l.Expires)
		l.Token = uint64(token)
		return l, err
	})
	if err != nil {
		return nil, b.fail(ctx, err)
	}
	return out, nil
}
