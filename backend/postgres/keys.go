package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/varve-go/varve"
)

var _ varve.KeyStore = (*Backend)(nil)

// putKeyTries bounds the statements of a PutKey: each one after the first
// follows a key committed, or deleted, by another transaction while the
// previous one ran.
const putKeyTries = 4

// PutKey implements [varve.KeyStore] in one statement, which inserts the
// key unless the subject has one and returns the subject's key.
func (b *Backend) PutKey(ctx context.Context, k varve.WrappedKey) (varve.WrappedKey, error) {
	if err := b.begin(ctx); err != nil {
		return varve.WrappedKey{}, err
	}
	for range putKeyTries {
		got := varve.WrappedKey{Subject: k.Subject}
		b.requests.Add(1)
		err := b.pool.QueryRow(ctx, b.sql.putKey, k.Subject, k.ID, k.Master, k.Wrapped).Scan(&got.ID, &got.Master, &got.Wrapped, &got.Created)
		if err == nil {
			return got, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return varve.WrappedKey{}, b.fail(ctx, err)
		}
	}
	return varve.WrappedKey{}, fmt.Errorf("postgres: the key of %q changed under %d tries to put one", k.Subject, putKeyTries)
}

// GetKey implements [varve.KeyStore].
func (b *Backend) GetKey(ctx context.Context, subject string) (varve.WrappedKey, error) {
	if err := b.begin(ctx); err != nil {
		return varve.WrappedKey{}, err
	}
	k := varve.WrappedKey{Subject: subject}
	b.requests.Add(1)
	err := b.pool.QueryRow(ctx, b.sql.getKey, subject).Scan(&k.ID, &k.Master, &k.Wrapped, &k.Created)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return varve.WrappedKey{}, varve.ErrKeyNotFound
	case err != nil:
		return varve.WrappedKey{}, b.fail(ctx, err)
	}
	return k, nil
}

// DeleteKey implements [varve.KeyStore].
func (b *Backend) DeleteKey(ctx context.Context, subject string, id uuid.UUID) (bool, error) {
	return b.changeKey(ctx, b.sql.deleteKey, subject, id)
}

// RewrapKey implements [varve.KeyStore].
func (b *Backend) RewrapKey(ctx context.Context, k varve.WrappedKey, oldMaster string) (bool, error) {
	return b.changeKey(ctx, b.sql.rewrapKey, k.Subject, k.ID, k.Master, k.Wrapped, oldMaster)
}

func (b *Backend) changeKey(ctx context.Context, q string, args ...any) (bool, error) {
	if err := b.begin(ctx); err != nil {
		return false, err
	}
	b.requests.Add(1)
	tag, err := b.pool.Exec(ctx, q, args...)
	if err != nil {
		return false, b.fail(ctx, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ListKeys implements [varve.KeyStore].
func (b *Backend) ListKeys(ctx context.Context, after string, limit int, buf []varve.WrappedKey) ([]varve.WrappedKey, error) {
	if err := b.begin(ctx); err != nil {
		return buf, err
	}
	b.requests.Add(1)
	rows, err := b.pool.Query(ctx, b.sql.listKeys, after, limit)
	if err != nil {
		return buf, b.fail(ctx, err)
	}
	defer rows.Close()
	n := len(buf)
	for rows.Next() {
		var k varve.WrappedKey
		if err := rows.Scan(&k.Subject, &k.ID, &k.Master, &k.Wrapped, &k.Created); err != nil {
			return buf[:n], b.fail(ctx, err)
		}
		buf = append(buf, k)
	}
	if err := rows.Err(); err != nil {
		return buf[:n], b.fail(ctx, err)
	}
	return buf, nil
}
