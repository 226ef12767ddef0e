package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/varve-go/varve"
)

// Leases live in the database file, so that the processes that share it
// share them; expiry is judged by each process's clock, which on one
// machine is the same clock.
const (
	qLeaseRow     = `SELECT holder, token, expires FROM leases WHERE name = ?1`
	qUpsertLease  = `INSERT INTO leases (name, holder, token, expires) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = excluded.token, expires = excluded.expires`
	qReleaseLease = `UPDATE leases SET holder = '', expires = 0 WHERE name = ?1 AND holder = ?2 AND token = ?3`
	qLeaseToken   = `SELECT token FROM leases WHERE name = ?1`
	// substr keeps LIKE's wildcards in the prefix from matching.
	qListLeases = `SELECT name, holder, token, expires FROM leases WHERE substr(name, 1, length(?1)) = ?1 AND holder <> '' AND expires > ?2 ORDER BY name`
)

// AcquireLease implements [varve.LeaseStore].
func (b *Backend) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (varve.Lease, error) {
	o := &op{ctx: ctx, kind: opLease, stream: name, holder: holder, ttl: ttl}
	if err := b.submit(o); err != nil {
		return varve.Lease{}, err
	}
	return o.lease, nil
}

// ReleaseLease implements [varve.LeaseStore].
func (b *Backend) ReleaseLease(ctx context.Context, name, holder string, token uint64) error {
	return b.submit(&op{ctx: ctx, kind: opRelease, stream: name, holder: holder, token: token})
}

// SaveCheckpointFenced implements [varve.LeaseStore].
func (b *Backend) SaveCheckpointFenced(ctx context.Context, name string, pos varve.Position, lease string, token uint64) error {
	return b.submit(&op{ctx: ctx, kind: opFencedCheckpoint, stream: name, pos: pos, leaseName: lease, token: token})
}

// ListLeases implements [varve.LeaseStore].
func (b *Backend) ListLeases(ctx context.Context, prefix string) ([]varve.Lease, error) {
	var out []varve.Lease
	err := b.read(ctx, func(c *conn) error {
		out = out[:0]
		return c.query(ctx, qListLeases, func(v []driver.Value) error {
			out = append(out, varve.Lease{Name: asString(v[0]), Holder: asString(v[1]), Token: uint64(asInt(v[2])), Expires: time.Unix(0, asInt(v[3]))})
			return nil
		}, prefix, time.Now().UnixNano())
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: list leases: %w", err)
	}
	return out, nil
}

func (w *writer) acquireLease(o *op) (error, bool) {
	var holder string
	var token, expires int64
	found, err := w.c.queryRow(bg, qLeaseRow, func(v []driver.Value) {
		holder, token, expires = asString(v[0]), asInt(v[1]), asInt(v[2])
	}, o.stream)
	if err != nil {
		return fmt.Errorf("sqlite: acquire lease: %w", err), true
	}
	now := time.Now()
	live := found && now.UnixNano() < expires
	switch {
	case live && holder == o.holder:
	case !live || holder == "":
		token++
	default:
		return &varve.LeaseHeldError{Holder: holder, Expires: time.Unix(0, expires)}, false
	}
	until := now.Add(o.ttl)
	if _, err := w.c.exec(bg, qUpsertLease, o.stream, o.holder, token, until.UnixNano()); err != nil {
		return fmt.Errorf("sqlite: acquire lease: %w", err), true
	}
	o.lease = varve.Lease{Name: o.stream, Holder: o.holder, Token: uint64(token), Expires: until}
	return nil, false
}

func (w *writer) releaseLease(o *op) (error, bool) {
	if _, err := w.c.exec(bg, qReleaseLease, o.stream, o.holder, int64(o.token)); err != nil {
		return fmt.Errorf("sqlite: release lease: %w", err), true
	}
	return nil, false
}

func (w *writer) fencedCheckpoint(o *op) (error, bool) {
	var token int64
	if _, err := w.c.queryRow(bg, qLeaseToken, func(v []driver.Value) { token = asInt(v[0]) }, o.leaseName); err != nil {
		return fmt.Errorf("sqlite: read lease: %w", err), true
	}
	if uint64(token) > o.token {
		return varve.ErrLeaseLost, false
	}
	if _, err := w.c.exec(bg, qSaveCheckpoint, o.stream, int64(o.pos.Commit), int64(o.pos.Seq)); err != nil {
		return fmt.Errorf("sqlite: save checkpoint %q: %w", o.stream, err), true
	}
	return nil, false
}
