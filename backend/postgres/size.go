package postgres

import "context"

// qSize sums the bytes of the schema's tables with their indexes and TOAST
// data (pg_total_relation_size), which PostgreSQL counts from its files.
const qSize = `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')`

// Size returns the bytes that the schema's tables take, with their indexes
// and TOAST data: the store's share of the database, not the database's
// write-ahead log.
func (b *Backend) Size(ctx context.Context) (int64, error) {
	if err := b.begin(ctx); err != nil {
		return 0, err
	}
	var n int64
	b.requests.Add(1)
	if err := b.pool.QueryRow(ctx, qSize, b.cfg.Schema).Scan(&n); err != nil {
		return 0, b.fail(ctx, err)
	}
	return n, nil
}
