package memory

import "context"

// Size returns the bytes of event data and metadata the backend holds: the
// sum of len(Data)+len(Metadata) over the events that are not deleted or
// truncated away (snapshots, checkpoints and the backend's own bookkeeping
// not counted). It walks the log under its read lock, so it costs time in
// proportion to the events held.
func (b *Backend) Size(ctx context.Context) (int64, error) {
	if err := b.check(ctx); err != nil {
		return 0, err
	}
	b.log.mu.RLock()
	defer b.log.mu.RUnlock()
	var n int64
	for _, r := range b.log.recs {
		if !r.dead {
			n += int64(r.ev.Size())
		}
	}
	return n, nil
}
