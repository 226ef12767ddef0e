package varve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ErrKeyNotFound: the key store holds no data key for the subject (none was
// made, or it was erased).
var ErrKeyNotFound = errors.New("data key not found")

// MaxWrappedKeyLen bounds [WrappedKey.Wrapped] and MaxMasterIDLen its
// Master.
const (
	MaxWrappedKeyLen = 1024
	MaxMasterIDLen   = 128
)

// WrappedKey is a subject's data key as a key store keeps it: encrypted
// ("wrapped") by a master key that the store never sees. Package shred
// makes, wraps and uses them.
type WrappedKey struct {
	// Subject is whose personal data the key encrypts, a name of
	// 1..[MaxNameLen] bytes ([CheckName]).
	Subject string
	// ID names this key: a subject erased and keyed again gets another.
	ID uuid.UUID
	// Master names the master key that wrapped it.
	Master string
	// Wrapped is the data key encrypted by the master key.
	Wrapped []byte
	// Created is when the key was stored, by the backend's clock.
	Created time.Time
}

// KeyStore is the capability of a backend to keep the wrapped data keys of
// crypto-shredding, one per subject. Deleting a key is the erasure of
// everything encrypted with it: a backend deletes it so that no later read
// of the store returns it, and does what it can so that its files stop
// holding it (see each backend's doc).
type KeyStore interface {
	// PutKey stores k unless its subject has a key already, and returns
	// the subject's key: k, or the one that was there, so that racing
	// creators agree on one key.
	PutKey(ctx context.Context, k WrappedKey) (WrappedKey, error)
	// GetKey returns the subject's key, or ErrKeyNotFound.
	GetKey(ctx context.Context, subject string) (WrappedKey, error)
	// DeleteKey deletes the subject's key if its id is id, and reports
	// whether it did: an erasure never deletes the key that replaced the
	// one it meant.
	DeleteKey(ctx context.Context, subject string, id uuid.UUID) (bool, error)
	// ListKeys appends to buf the keys of the subjects after after, in
	// byte order of subjects, at most limit of them.
	ListKeys(ctx context.Context, after string, limit int, buf []WrappedKey) ([]WrappedKey, error)
	// RewrapKey replaces the Master and Wrapped of the subject's key if
	// its id is k.ID and its master is oldMaster, and reports whether it
	// did (a rotation that lost a race with an erasure or another rotation
	// does nothing).
	RewrapKey(ctx context.Context, k WrappedKey, oldMaster string) (bool, error)
}

// Keys is a store's key capability. Every method fails with
// [ErrNotSupported] when the backend keeps no keys.
type Keys struct {
	s *Store
	b KeyStore
}

// Keys returns the store's key capability.
func (s *Store) Keys() Keys { return Keys{s, capability[KeyStore](s.b)} }

func (k Keys) check(ctx context.Context, subject string) error {
	if err := k.s.ready(ctx); err != nil {
		return err
	}
	if k.b == nil {
		return ErrNotSupported
	}
	return CheckName(subject)
}

func checkWrapped(w WrappedKey) error {
	switch {
	case w.ID == uuid.Nil:
		return invalid("key of %q without an id", w.Subject)
	case len(w.Wrapped) == 0 || len(w.Wrapped) > MaxWrappedKeyLen:
		return invalid("wrapped key of %d bytes: 1..%d", len(w.Wrapped), MaxWrappedKeyLen)
	case w.Master == "" || len(w.Master) > MaxMasterIDLen:
		return invalid("master key id of %d bytes: 1..%d", len(w.Master), MaxMasterIDLen)
	}
	return checkText("master key id", w.Master)
}

// Put stores w unless its subject has a key, and returns the subject's key.
func (k Keys) Put(ctx context.Context, w WrappedKey) (WrappedKey, error) {
	err := k.check(ctx, w.Subject)
	if err == nil {
		err = checkWrapped(w)
	}
	var got WrappedKey
	if err == nil {
		got, err = k.b.PutKey(ctx, w)
	}
	if err != nil {
		return WrappedKey{}, fmt.Errorf("varve: put key of %q: %w", w.Subject, err)
	}
	return got, nil
}

// Get returns the subject's key, or [ErrKeyNotFound].
func (k Keys) Get(ctx context.Context, subject string) (WrappedKey, error) {
	err := k.check(ctx, subject)
	var got WrappedKey
	if err == nil {
		got, err = k.b.GetKey(ctx, subject)
	}
	if err != nil {
		return WrappedKey{}, fmt.Errorf("varve: get key of %q: %w", subject, err)
	}
	return got, nil
}

// Delete deletes the subject's key if its id is id, and reports whether it
// did.
func (k Keys) Delete(ctx context.Context, subject string, id uuid.UUID) (bool, error) {
	err := k.check(ctx, subject)
	deleted := false
	if err == nil {
		deleted, err = k.b.DeleteKey(ctx, subject, id)
	}
	if err != nil {
		return false, fmt.Errorf("varve: delete key of %q: %w", subject, err)
	}
	return deleted, nil
}

// List appends to buf the keys of the subjects after after, in byte order,
// at most limit (1..[MaxListLimit]) of them.
func (k Keys) List(ctx context.Context, after string, limit int, buf []WrappedKey) ([]WrappedKey, error) {
	err := k.s.ready(ctx)
	if err == nil && k.b == nil {
		err = ErrNotSupported
	}
	if err == nil && (limit < 1 || limit > MaxListLimit) {
		err = invalid("list limit %d: 1..%d", limit, MaxListLimit)
	}
	if err == nil && after != "" {
		err = CheckName(after)
	}
	if err == nil {
		buf, err = k.b.ListKeys(ctx, after, limit, buf)
	}
	if err != nil {
		return buf, fmt.Errorf("varve: list keys after %q: %w", after, err)
	}
	return buf, nil
}

// Rewrap replaces the master and wrapped bytes of the subject's key if it
// is still w.ID under oldMaster, and reports whether it did.
func (k Keys) Rewrap(ctx context.Context, w WrappedKey, oldMaster string) (bool, error) {
	err := k.check(ctx, w.Subject)
	if err == nil {
		err = checkWrapped(w)
	}
	done := false
	if err == nil {
		done, err = k.b.RewrapKey(ctx, w, oldMaster)
	}
	if err != nil {
		return false, fmt.Errorf("varve: rewrap key of %q: %w", w.Subject, err)
	}
	return done, nil
}
