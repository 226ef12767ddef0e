package memory

import (
	"context"
	"slices"
	"strings"

	"github.com/varve-go/varve"
)

var (
	_ varve.StreamLister     = (*Backend)(nil)
	_ varve.CheckpointLister = (*Backend)(nil)
)

// ListStreams implements varve.StreamLister. It visits every stream, shard
// by shard: an operator's listing, not a hot path.
func (b *Backend) ListStreams(ctx context.Context, q varve.ListQuery, buf []varve.StreamInfo) ([]varve.StreamInfo, error) {
	if err := b.check(ctx); err != nil || q.Limit <= 0 {
		return buf, err
	}
	var page []varve.StreamInfo
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.RLock()
		for name, st := range sh.streams {
			if name > q.After && strings.HasPrefix(name, q.Prefix) {
				page = keepFirst(page, q.Limit, info(st), func(s varve.StreamInfo) string { return s.Stream })
			}
		}
		sh.mu.RUnlock()
	}
	return append(buf, page...), nil
}

// ListCheckpoints implements varve.CheckpointLister.
func (b *Backend) ListCheckpoints(ctx context.Context, q varve.ListQuery, buf []varve.NamedPosition) ([]varve.NamedPosition, error) {
	if err := b.check(ctx); err != nil || q.Limit <= 0 {
		return buf, err
	}
	var page []varve.NamedPosition
	b.kvMu.Lock()
	for name, pos := range b.checkpoints {
		if name > q.After && strings.HasPrefix(name, q.Prefix) {
			page = keepFirst(page, q.Limit, varve.NamedPosition{Name: name, Position: pos}, func(p varve.NamedPosition) string { return p.Name })
		}
	}
	b.kvMu.Unlock()
	return append(buf, page...), nil
}

// keepFirst inserts v into page, sorted by key, and keeps at most limit
// entries: the smallest keys.
func keepFirst[T any](page []T, limit int, v T, key func(T) string) []T {
	k := key(v)
	if len(page) == limit && k >= key(page[limit-1]) {
		return page
	}
	i, _ := slices.BinarySearchFunc(page, k, func(e T, k string) int { return strings.Compare(key(e), k) })
	page = slices.Insert(page, i, v)
	if len(page) > limit {
		page = page[:limit]
	}
	return page
}

func info(st *stream) varve.StreamInfo {
	return varve.StreamInfo{
		Stream: st.name, Version: st.version, LastPosition: st.lastPos,
		CreatedAt: st.created, UpdatedAt: st.updated, Deleted: st.deleted || st.tombstoned, Tombstoned: st.tombstoned,
	}
}
