package nats

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Size returns the bytes JetStream keeps for the store: its stream's
// (State.Bytes: messages with their subjects and headers) and those of its
// snapshot, checkpoint and key buckets (their streams, "KV_<bucket>"), a bucket
// not yet created counting nothing. Replicas are not counted: it is the
// bytes of one copy.
func (b *Backend) Size(ctx context.Context) (int64, error) {
	if err := b.ready(ctx); err != nil {
		return 0, err
	}
	ctx, cancel := b.c.Bound(ctx)
	defer cancel()
	var total int64
	for _, name := range []string{b.cfg.Stream, "KV_" + b.cfg.SnapshotBucket, "KV_" + b.cfg.CheckpointBucket, "KV_" + b.cfg.KeyBucket} {
		b.c.CountRequest()
		s, err := b.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && name != b.cfg.Stream {
			continue
		}
		if err != nil {
			return 0, b.fail(fmt.Sprintf("size of stream %s", name), b.c.Err(ctx, err))
		}
		total += int64(s.CachedInfo().State.Bytes)
	}
	return total, nil
}
