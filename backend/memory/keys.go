package memory

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

func cloneKey(k varve.WrappedKey) varve.WrappedKey {
	k.Subject = strings.Clone(k.Subject)
	k.Master = strings.Clone(k.Master)
	k.Wrapped = slices.Clone(k.Wrapped)
	return k
}

// PutKey implements varve.KeyStore.
func (b *Backend) PutKey(ctx context.Context, k varve.WrappedKey) (varve.WrappedKey, error) {
	if err := b.check(ctx); err != nil {
		return varve.WrappedKey{}, err
	}
	b.kvMu.Lock()
	defer b.kvMu.Unlock()
	if have, ok := b.keys[k.Subject]; ok {
		return cloneKey(have), nil
	}
	if b.keys == nil {
		b.keys = map[string]varve.WrappedKey{}
	}
	k = cloneKey(k)
	k.Created = time.Now()
	b.keys[k.Subject] = k
	return cloneKey(k), nil
}

// GetKey implements varve.KeyStore.
func (b *Backend) GetKey(ctx context.Context, subject string) (varve.WrappedKey, error) {
	if err := b.check(ctx); err != nil {
		return varve.WrappedKey{}, err
	}
	b.kvMu.Lock()
	defer b.kvMu.Unlock()
	k, ok := b.keys[subject]
	if !ok {
		return varve.WrappedKey{}, varve.ErrKeyNotFound
	}
	return cloneKey(k), nil
}

// DeleteKey implements varve.KeyStore. The wrapped bytes are overwritten
// before the key leaves the map.
func (b *Backend) DeleteKey(ctx context.Context, subject string, id uuid.UUID) (bool, error) {
	if err := b.check(ctx); err != nil {
		return false, err
	}
	b.kvMu.Lock()
	defer b.kvMu.Unlock()
	k, ok := b.keys[subject]
	if !ok || k.ID != id {
		return false, nil
	}
	clear(k.Wrapped)
	delete(b.keys, subject)
	return true, nil
}

// ListKeys implements varve.KeyStore.
func (b *Backend) ListKeys(ctx context.Context, after string, limit int, buf []varve.WrappedKey) ([]varve.WrappedKey, error) {
	if err := b.check(ctx); err != nil {
		return buf, err
	}
	b.kvMu.Lock()
	subjects := make([]string, 0, len(b.keys))
	for s := range b.keys {
		if s > after {
			subjects = append(subjects, s)
		}
	}
	slices.Sort(subjects)
	for _, s := range subjects[:min(limit, len(subjects))] {
		buf = append(buf, cloneKey(b.keys[s]))
	}
	b.kvMu.Unlock()
	return buf, nil
}

// RewrapKey implements varve.KeyStore.
func (b *Backend) RewrapKey(ctx context.Context, k varve.WrappedKey, oldMaster string) (bool, error) {
	if err := b.check(ctx); err != nil {
		return false, err
	}
	b.kvMu.Lock()
	defer b.kvMu.Unlock()
	have, ok := b.keys[k.Subject]
	if !ok || have.ID != k.ID || have.Master != oldMaster {
		return false, nil
	}
	clear(have.Wrapped)
	have.Master = strings.Clone(k.Master)
	have.Wrapped = slices.Clone(k.Wrapped)
	b.keys[k.Subject] = have
	return true, nil
}
