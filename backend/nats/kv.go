package nats

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
)

// bucket opens the key-value bucket, creating it on first use unless
// !create; without create, a missing bucket gives nil and no error.
func (b *Backend) bucket(ctx context.Context, name string, slot *jetstream.KeyValue, create bool) (jetstream.KeyValue, error) {
	b.kvMu.Lock()
	defer b.kvMu.Unlock()
	if *slot != nil {
		return *slot, nil
	}
	if err := b.ready(ctx); err != nil {
		return nil, err
	}
	b.requests.Add(1)
	kv, err := b.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) && !create {
		return nil, nil
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		storage := jetstream.FileStorage
		if b.cfg.MemoryStorage {
			storage = jetstream.MemoryStorage
		}
		b.requests.Add(1)
		kv, err = b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      name,
			Description: "varve " + b.cfg.Stream,
			History:     1,
			Storage:     storage,
			Replicas:    b.cfg.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			b.requests.Add(1)
			kv, err = b.js.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", name, err)
	}
	*slot = kv
	return kv, nil
}

func (b *Backend) kvGet(ctx context.Context, kv jetstream.KeyValue, key string) ([]byte, bool, error) {
	if err := b.ready(ctx); err != nil {
		return nil, false, err
	}
	b.requests.Add(1)
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return e.Value(), true, nil
}

func (b *Backend) kvPut(ctx context.Context, kv jetstream.KeyValue, key string, value []byte) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	b.requests.Add(1)
	_, err := kv.Put(ctx, key, value)
	return err
}

// SaveSnapshot implements varve.SnapshotStore: the snapshot replaces the
// stream's key in the snapshot bucket (one publish).
func (b *Backend) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	if err := varve.CheckStreamID(s.Stream); err != nil {
		return fmt.Errorf("nats: save snapshot: %w", err)
	}
	var at hint // where the snapshot's version is, if this backend knows
	if h, ok := b.cachedHead(s.Stream); ok && h.st.isCommit() && h.first <= s.Version && s.Version <= h.st.version {
		at = hint{incarnation: h.incarnation(), seq: h.seq, first: h.first}
	}
	kv, err := b.bucket(ctx, b.cfg.SnapshotBucket, &b.snaps, true)
	if err == nil {
		err = b.kvPut(ctx, kv, encodeID(s.Stream), encodeSnapshot(s, at))
	}
	if err != nil {
		return fmt.Errorf("nats: save snapshot of %q: %w", s.Stream, err)
	}
	return nil
}

// LoadSnapshot implements varve.SnapshotStore (one direct get).
func (b *Backend) LoadSnapshot(ctx context.Context, stream string) (varve.Snapshot, bool, error) {
	if err := varve.CheckStreamID(stream); err != nil {
		return varve.Snapshot{}, false, fmt.Errorf("nats: load snapshot: %w", err)
	}
	kv, err := b.bucket(ctx, b.cfg.SnapshotBucket, &b.snaps, true)
	if err != nil {
		return varve.Snapshot{}, false, fmt.Errorf("nats: load snapshot of %q: %w", stream, err)
	}
	v, ok, err := b.kvGet(ctx, kv, encodeID(stream))
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("nats: load snapshot of %q: %w", stream, err)
		}
		return varve.Snapshot{}, false, err
	}
	s, at, err := decodeSnapshot(stream, v)
	if err != nil {
		return varve.Snapshot{}, false, fmt.Errorf("nats: load snapshot of %q: %w", stream, err)
	}
	if at.seq != 0 {
		// A read of the events after the snapshot starts at its commit.
		b.rememberHint(stream, at)
	}
	return s, true, nil
}

// deleteSnapshot removes the snapshot of a deleted stream, so that a new
// stream of the same name never starts from it.
func (b *Backend) deleteSnapshot(ctx context.Context, stream string) error {
	kv, err := b.bucket(ctx, b.cfg.SnapshotBucket, &b.snaps, false)
	if err != nil || kv == nil {
		return err
	}
	b.requests.Add(1)
	if err := kv.Purge(ctx, encodeID(stream)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete snapshot: %w", err)
	}
	return nil
}

// SaveCheckpoint implements varve.CheckpointStore.
func (b *Backend) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	if name == "" {
		return fmt.Errorf("nats: save checkpoint: empty name: %w", varve.ErrInvalidArgument)
	}
	kv, err := b.bucket(ctx, b.cfg.CheckpointBucket, &b.ckpts, true)
	if err == nil {
		err = b.kvPut(ctx, kv, encodeID(name), []byte(pos.String()))
	}
	if err != nil {
		return fmt.Errorf("nats: save checkpoint %q: %w", name, err)
	}
	return nil
}

// LoadCheckpoint implements varve.CheckpointStore.
func (b *Backend) LoadCheckpoint(ctx context.Context, name string) (varve.Position, bool, error) {
	if name == "" {
		return varve.Start, false, fmt.Errorf("nats: load checkpoint: empty name: %w", varve.ErrInvalidArgument)
	}
	kv, err := b.bucket(ctx, b.cfg.CheckpointBucket, &b.ckpts, true)
	if err != nil {
		return varve.Start, false, fmt.Errorf("nats: load checkpoint %q: %w", name, err)
	}
	v, ok, err := b.kvGet(ctx, kv, encodeID(name))
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("nats: load checkpoint %q: %w", name, err)
		}
		return varve.Start, false, err
	}
	pos, err := varve.ParsePosition(string(v))
	if err != nil {
		return varve.Start, false, fmt.Errorf("nats: load checkpoint %q: %w", name, err)
	}
	return pos, true, nil
}
