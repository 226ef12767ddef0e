package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
)

// bucket opens the key-value bucket, creating it on first use unless
// !create; without create, a missing bucket gives nil and no error. ctx
// comes from the client's Bound.
func (b *Backend) bucket(ctx context.Context, name string, slot *jetstream.KeyValue, create bool) (jetstream.KeyValue, error) {
	return b.openBucket(ctx, name, slot, create, false)
}

// openBucket is bucket; a bucket it creates with deletable lets single
// messages be deleted (nats.go's buckets deny it), for the secure deletes
// of the key bucket.
func (b *Backend) openBucket(ctx context.Context, name string, slot *jetstream.KeyValue, create, deletable bool) (jetstream.KeyValue, error) {
	select {
	case b.kvLock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.kvLock }()
	if *slot != nil {
		return *slot, nil
	}
	b.c.CountRequest()
	kv, err := b.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) && !create {
		return nil, nil
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		storage := jetstream.FileStorage
		if b.cfg.MemoryStorage {
			storage = jetstream.MemoryStorage
		}
		b.c.CountRequest()
		if deletable {
			kv, err = b.createDeletableBucket(ctx, name, storage)
		} else {
			kv, err = b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket:      name,
				Description: "varve " + b.cfg.Stream,
				History:     1,
				Storage:     storage,
				Replicas:    b.cfg.Replicas,
			})
		}
		if errors.Is(err, jetstream.ErrBucketExists) {
			b.c.CountRequest()
			kv, err = b.js.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", name, b.c.Err(ctx, err))
	}
	*slot = kv
	return kv, nil
}

// createDeletableBucket creates bucket name's stream as nats.go creates
// a bucket of history 1 (CreateKeyValue), but with message deletes
// allowed, and opens it.
func (b *Backend) createDeletableBucket(ctx context.Context, name string, storage jetstream.StorageType) (jetstream.KeyValue, error) {
	_, err := b.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:              "KV_" + name,
		Description:       "varve " + b.cfg.Stream,
		Subjects:          []string{"$KV." + name + ".>"},
		MaxMsgsPerSubject: 1,
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		Storage:           storage,
		Replicas:          max(b.cfg.Replicas, 1),
		AllowRollup:       true,
		Duplicates:        2 * time.Minute,
		AllowDirect:       true,
		Discard:           jetstream.DiscardNew,
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil, jetstream.ErrBucketExists
	}
	if err != nil {
		return nil, err
	}
	b.c.CountRequest()
	return b.js.KeyValue(ctx, name)
}

// kvKeys lists the keys of bucket name that match filter (a subject
// filter over keys, such as "=L.>"), from the server's state of the
// bucket's stream. A watcher (what nats.go's key listings use) can end its
// initial values early while keys are being updated; the stream's state
// cannot. A bucket that does not exist has no keys.
func (b *Backend) kvKeys(ctx context.Context, name, filter string) ([]string, error) {
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	b.c.CountRequest()
	s, err := b.js.Stream(ctx, "KV_"+name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	var info *jetstream.StreamInfo
	if err == nil {
		b.c.CountRequest()
		info, err = s.Info(ctx, jetstream.WithSubjectFilter("$KV."+name+"."+filter))
	}
	if err != nil {
		return nil, b.c.Err(ctx, err)
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, "$KV."+name+"."))
	}
	return keys, nil
}

// kvGet reads key from the bucket; a missing bucket is created if create
// is set, and holds no key otherwise.
func (b *Backend) kvGet(ctx context.Context, name string, slot *jetstream.KeyValue, key string, create bool) ([]byte, bool, error) {
	if err := b.ready(ctx); err != nil {
		return nil, false, err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.bucket(ctx, name, slot, create)
	if err != nil || kv == nil {
		return nil, false, b.fail("", err)
	}
	b.c.CountRequest()
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, b.fail("get key", b.c.Err(ctx, err))
	}
	return e.Value(), true, nil
}

// kvPut writes key to the bucket, creating the bucket on first use.
func (b *Backend) kvPut(ctx context.Context, name string, slot *jetstream.KeyValue, key string, value []byte) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.bucket(ctx, name, slot, true)
	if err != nil {
		return b.fail("", err)
	}
	b.c.CountRequest()
	if _, err := kv.Put(ctx, key, value); err != nil {
		return b.fail("put key", b.c.Err(ctx, err))
	}
	return nil
}

// SaveSnapshot implements varve.SnapshotStore: the snapshot replaces the
// stream's key in the snapshot bucket (one publish).
func (b *Backend) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	var at hint // where the snapshot's version is, if this backend knows
	if h, ok := b.streams.head(s.Stream); ok && h.st.isCommit() && h.first <= s.Version && s.Version <= h.st.version {
		at = hint{incarnation: h.incarnation(), seq: h.seq, first: h.first}
	}
	return b.kvPut(ctx, b.cfg.SnapshotBucket, &b.snaps, encodeID(s.Stream), encodeSnapshot(s, at))
}

// LoadSnapshot implements varve.SnapshotStore (one direct get).
func (b *Backend) LoadSnapshot(ctx context.Context, stream string) (varve.Snapshot, bool, error) {
	s, _, ok, err := b.loadSnapshot(ctx, stream)
	return s, ok, err
}

// loadSnapshot reads the stream's snapshot from the bucket, and where it
// was taken when the process that saved it knew (else a zero hint).
func (b *Backend) loadSnapshot(ctx context.Context, stream string) (varve.Snapshot, hint, bool, error) {
	v, ok, err := b.kvGet(ctx, b.cfg.SnapshotBucket, &b.snaps, encodeID(stream), true)
	if err != nil || !ok {
		return varve.Snapshot{}, hint{}, false, err
	}
	s, at, err := decodeSnapshot(stream, v)
	if err != nil {
		return varve.Snapshot{}, hint{}, false, b.fail("decode snapshot", err)
	}
	if at.seq != 0 {
		// A read of the events after the snapshot starts at its commit.
		b.streams.rememberHint(stream, at)
	}
	return s, at, true, nil
}

// deleteSnapshot removes the snapshot of a deleted stream, so that a new
// stream of the same name never starts from it.
func (b *Backend) deleteSnapshot(ctx context.Context, stream string) error {
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	kv, err := b.bucket(ctx, b.cfg.SnapshotBucket, &b.snaps, false)
	if err != nil || kv == nil {
		return err
	}
	b.c.CountRequest()
	if err := kv.Purge(ctx, encodeID(stream)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete snapshot: %w", b.c.Err(ctx, err))
	}
	return nil
}

// SaveCheckpoint implements varve.CheckpointStore. The name must not be
// empty (the Store refuses empty names too).
func (b *Backend) SaveCheckpoint(ctx context.Context, name string, pos varve.Position) error {
	if name == "" {
		return fmt.Errorf("nats: empty checkpoint name: %w", varve.ErrInvalidArgument)
	}
	return b.kvPut(ctx, b.cfg.CheckpointBucket, &b.ckpts, encodeID(name), []byte(pos.String()))
}

// LoadCheckpoint implements varve.CheckpointStore.
func (b *Backend) LoadCheckpoint(ctx context.Context, name string) (varve.Position, bool, error) {
	if name == "" {
		return varve.Start, false, fmt.Errorf("nats: empty checkpoint name: %w", varve.ErrInvalidArgument)
	}
	// Loading creates no bucket: without one, no checkpoint was saved.
	v, ok, err := b.kvGet(ctx, b.cfg.CheckpointBucket, &b.ckpts, encodeID(name), false)
	if err != nil || !ok {
		return varve.Start, false, err
	}
	// A checkpoint saved fenced by a lease carries its token after a tab;
	// one that a lease's fence wrote before it was ever saved has only the
	// token.
	text, _, _ := strings.Cut(string(v), "\t")
	if text == "" {
		return varve.Start, false, nil
	}
	pos, err := varve.ParsePosition(text)
	if err != nil {
		return varve.Start, false, b.fail("decode checkpoint", err)
	}
	return pos, true, nil
}
