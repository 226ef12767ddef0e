package postgres

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

// GroupStats returns the number of groups that group commit committed and
// of the appends in them.
func GroupStats(b *Backend) (groups, members uint64) {
	if b.group == nil {
		return 0, 0
	}
	return b.group.groups.Load(), b.group.members.Load()
}

// GroupLoad returns the units that group commit has in flight and the
// appends it has queued.
func GroupLoad(b *Backend) (inflight, queued int) {
	b.group.mu.Lock()
	defer b.group.mu.Unlock()
	return b.group.inflight, len(b.group.queue)
}
