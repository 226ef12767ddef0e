package postgres

import (
	"context"

	"github.com/varve-go/varve"
)

// UseXminHorizon makes b read $all below the xmin of the whole server, as
// schemas before migration 5 are read: the baseline of the horizon
// benchmarks.
func UseXminHorizon(b *Backend) {
	b.sql = newQueries(b.schema, xminHorizon, b.version)
}

// FilterQueries returns the statements of filtered reads: by category, by
// type, by stream prefix.
func FilterQueries(b *Backend) (byCategory, byType, byPrefix string) {
	return b.sql.readByCategory, b.sql.readByType, b.sql.readByPrefix
}

// GroupStats returns the number of groups that group commit committed, of
// the appends in them and of the appends that ran alone.
func GroupStats(b *Backend) (groups, members, alone uint64) {
	if b.group == nil {
		return 0, 0, 0
	}
	return b.group.groups.Load(), b.group.members.Load(), b.group.alone.Load()
}

// GroupLoad returns the units that group commit has in flight and the
// appends it has queued.
func GroupLoad(b *Backend) (inflight, queued int) {
	b.group.mu.Lock()
	defer b.group.mu.Unlock()
	return b.group.inflight, len(b.group.queue)
}

// GroupAppend appends reqs (one per stream) as one group, as a committer
// does, on the calling goroutine; an append the group declined has a zero
// result.
func GroupAppend(ctx context.Context, b *Backend, reqs []varve.AppendRequest) ([]varve.AppendResult, error) {
	grp := make([]*member, len(reqs))
	for i := range reqs {
		grp[i] = &member{req: reqs[i]}
	}
	if err := b.group.execOne(ctx, grp); err != nil {
		return nil, err
	}
	res := make([]varve.AppendResult, len(grp))
	for i, m := range grp {
		res[i] = m.res
	}
	return res, nil
}
