package nats

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
)

var _ varve.KeyStore = (*Backend)(nil)

// A key is an entry of the key bucket named by its subject (encodeID).
// Its value: a format byte, the id (16 bytes), the creation time (Unix
// nanoseconds, 8 bytes big-endian), the master's length (1 byte) and the
// master, then the wrapped key.
const (
	keyFormat    = 1
	keyHeaderLen = 1 + 16 + 8 + 1
)

// keyTries bounds the rounds of a key's write that loses races: each round
// after the first follows another process's change of the same key.
const keyTries = 4

func encodeKey(k varve.WrappedKey) []byte {
	v := make([]byte, 0, keyHeaderLen+len(k.Master)+len(k.Wrapped))
	v = append(v, keyFormat)
	v = append(v, k.ID[:]...)
	v = binary.BigEndian.AppendUint64(v, uint64(k.Created.UnixNano()))
	v = append(v, byte(len(k.Master)))
	v = append(v, k.Master...)
	return append(v, k.Wrapped...)
}

func decodeKey(subject string, v []byte) (varve.WrappedKey, error) {
	if len(v) < keyHeaderLen || v[0] != keyFormat || len(v) < keyHeaderLen+int(v[keyHeaderLen-1]) {
		return varve.WrappedKey{}, fmt.Errorf("a key of %d bytes that this version cannot read", len(v))
	}
	k := varve.WrappedKey{Subject: subject, Created: time.Unix(0, int64(binary.BigEndian.Uint64(v[17:25])))}
	copy(k.ID[:], v[1:17])
	m := keyHeaderLen + int(v[keyHeaderLen-1])
	k.Master = string(v[keyHeaderLen:m])
	k.Wrapped = slices.Clone(v[m:])
	return k, nil
}

// keyBucket opens the key bucket; without create, a missing one is nil.
func (b *Backend) keyBucket(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	kv, err := b.openBucket(ctx, b.cfg.KeyBucket, &b.keys, create, true)
	return kv, b.fail("", err)
}

// keyStream returns the key bucket's stream, whose messages DeleteKey
// erases.
func (b *Backend) keyStream(ctx context.Context) (jetstream.Stream, error) {
	select {
	case b.kvLock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.kvLock }()
	if b.keysJS == nil {
		b.c.CountRequest()
		s, err := b.js.Stream(ctx, "KV_"+b.cfg.KeyBucket)
		if err != nil {
			return nil, b.fail("open the key bucket's stream", b.c.Err(ctx, err))
		}
		if s.CachedInfo().Config.DenyDelete {
			return nil, fmt.Errorf("nats: the key bucket %s denies message deletes, so its keys cannot be erased: it was not made by this package", b.cfg.KeyBucket)
		}
		b.keysJS = s
	}
	return b.keysJS, nil
}

// getKey reads the subject's key and its revision; found is false when
// the subject has none.
func (b *Backend) getKey(ctx context.Context, kv jetstream.KeyValue, subject string) (k varve.WrappedKey, rev uint64, found bool, err error) {
	b.c.CountRequest()
	e, err := kv.Get(ctx, encodeID(subject))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return varve.WrappedKey{}, 0, false, nil
	}
	if err != nil {
		return varve.WrappedKey{}, 0, false, b.fail("get key", b.c.Err(ctx, err))
	}
	k, err = decodeKey(subject, e.Value())
	if err != nil {
		return varve.WrappedKey{}, 0, false, b.fail("decode key", err)
	}
	return k, e.Revision(), true, nil
}

// PutKey implements [varve.KeyStore]: a create of the subject's entry,
// which the server refuses when it exists, and then a read of the one that
// does.
func (b *Backend) PutKey(ctx context.Context, k varve.WrappedKey) (varve.WrappedKey, error) {
	if err := b.ready(ctx); err != nil {
		return varve.WrappedKey{}, err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.keyBucket(ctx, true)
	if err != nil {
		return varve.WrappedKey{}, err
	}
	k.Created = time.Unix(0, time.Now().UnixNano())
	for range keyTries {
		b.c.CountRequest()
		_, err := kv.Create(ctx, encodeID(k.Subject), encodeKey(k))
		if err == nil {
			return k, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return varve.WrappedKey{}, b.fail("put key", b.c.Err(ctx, err))
		}
		have, _, found, err := b.getKey(ctx, kv, k.Subject)
		if err != nil || found {
			return have, err
		}
		// Deleted since the create: try again.
	}
	return varve.WrappedKey{}, fmt.Errorf("nats: the key changed under %d tries to put one", keyTries)
}

// GetKey implements [varve.KeyStore] (one direct get).
func (b *Backend) GetKey(ctx context.Context, subject string) (varve.WrappedKey, error) {
	if err := b.ready(ctx); err != nil {
		return varve.WrappedKey{}, err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.keyBucket(ctx, false)
	if err != nil {
		return varve.WrappedKey{}, err
	}
	if kv == nil {
		return varve.WrappedKey{}, varve.ErrKeyNotFound
	}
	k, _, found, err := b.getKey(ctx, kv, subject)
	if err == nil && !found {
		err = varve.ErrKeyNotFound
	}
	return k, err
}

// DeleteKey implements [varve.KeyStore]: it reads the subject's entry and,
// if it holds the key id, deletes its message with the server's secure
// delete, which overwrites the message's bytes in the stream's files. The
// delete of a message the bucket no longer holds fails, so a key replaced
// meanwhile is left alone; one rewrapped meanwhile is read again.
func (b *Backend) DeleteKey(ctx context.Context, subject string, id uuid.UUID) (bool, error) {
	if err := b.ready(ctx); err != nil {
		return false, err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.keyBucket(ctx, false)
	if err != nil || kv == nil {
		return false, err
	}
	s, err := b.keyStream(ctx)
	if err != nil {
		return false, err
	}
	for range keyTries {
		k, rev, found, err := b.getKey(ctx, kv, subject)
		if err != nil || !found || k.ID != id {
			return false, err
		}
		b.c.CountRequest()
		derr := s.SecureDeleteMsg(ctx, rev)
		if derr == nil {
			return true, nil
		}
		if !errors.Is(derr, jetstream.ErrMsgDeleteUnsuccessful) {
			return false, b.fail("delete key", b.c.Err(ctx, derr))
		}
		// The message is gone (the key was deleted or rewrapped since the
		// read) or the server failed: a read tells which.
		_, now, found, err := b.getKey(ctx, kv, subject)
		if err == nil && found && now == rev {
			return false, b.fail("delete key", derr)
		}
	}
	return false, fmt.Errorf("nats: the key changed under %d tries to delete it", keyTries)
}

// RewrapKey implements [varve.KeyStore]: a read of the subject's entry
// and, if it holds the key id and master, an update of it at that
// revision, which the server refuses if the entry changed since.
func (b *Backend) RewrapKey(ctx context.Context, k varve.WrappedKey, oldMaster string) (bool, error) {
	if err := b.ready(ctx); err != nil {
		return false, err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.keyBucket(ctx, false)
	if err != nil || kv == nil {
		return false, err
	}
	for range keyTries {
		have, rev, found, err := b.getKey(ctx, kv, k.Subject)
		if err != nil || !found || have.ID != k.ID || have.Master != oldMaster {
			return false, err
		}
		have.Master, have.Wrapped = k.Master, k.Wrapped
		b.c.CountRequest()
		_, err = kv.Update(ctx, encodeID(k.Subject), encodeKey(have), rev)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return false, b.fail("rewrap key", b.c.Err(ctx, err))
		}
	}
	return false, fmt.Errorf("nats: the key changed under %d tries to rewrap it", keyTries)
}

// ListKeys implements [varve.KeyStore]. The bucket's keys are not in the
// subjects' order, so a page reads the subjects of all of them (one stream
// info, see kvKeys), sorts those after after, and reads the first limit
// of them (a direct get each).
func (b *Backend) ListKeys(ctx context.Context, after string, limit int, buf []varve.WrappedKey) ([]varve.WrappedKey, error) {
	if err := b.ready(ctx); err != nil {
		return buf, err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.keyBucket(ctx, false)
	if err != nil || kv == nil {
		return buf, err
	}
	tokens, err := b.kvKeys(ctx, b.cfg.KeyBucket, ">")
	if err != nil {
		return buf, b.fail("list keys", err)
	}
	subjects := make([]string, 0, len(tokens))
	for _, tok := range tokens {
		s, err := decodeID(tok)
		if err != nil {
			return buf, b.fail("list keys", fmt.Errorf("key %q: %w", tok, err))
		}
		if s > after {
			subjects = append(subjects, s)
		}
	}
	slices.Sort(subjects)
	n := len(buf)
	for _, s := range subjects {
		if len(buf)-n == limit {
			break
		}
		k, _, found, err := b.getKey(ctx, kv, s)
		if err != nil {
			return buf[:n], err
		}
		if found { // else deleted since the listing
			buf = append(buf, k)
		}
	}
	return buf, nil
}
