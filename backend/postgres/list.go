package postgres

import (
	"context"
	"time"

	"github.com/varve-go/varve"
)

var (
	_ varve.StreamLister     = (*Backend)(nil)
	_ varve.CheckpointLister = (*Backend)(nil)
)

// The lists compare and order names in the "C" collation, byte order, as
// the other backends do whatever the database's collation. The primary
// keys are in the database's collation, so a page is a scan of the table
// and a top-N sort: fine for an operator's listing of thousands of
// streams, slow for millions (a "C"-collated index would make it a range
// scan).

func listStreamsSQL(schema string) string {
	return `SELECT s.stream, s.version, coalesce(e.tx, s.last_tx), coalesce(e.seq, s.last_seq),
    s.deleted, s.tombstoned, s.created_at, s.updated_at
FROM (
    SELECT * FROM ` + schema + `.streams t
    WHERE starts_with(t.stream, $1) AND t.stream COLLATE "C" > $2
    ORDER BY t.stream COLLATE "C" LIMIT $3
) s
LEFT JOIN LATERAL (
    SELECT e.tx, e.seq FROM ` + schema + `.events e
    WHERE e.stream = s.stream ORDER BY e.version DESC LIMIT 1
) e ON true
ORDER BY s.stream COLLATE "C"`
}

func listCheckpointsSQL(schema string) string {
	return `SELECT name, commit_pos, seq_pos FROM ` + schema + `.checkpoints
WHERE starts_with(name, $1) AND name COLLATE "C" > $2
ORDER BY name COLLATE "C" LIMIT $3`
}

// ListStreams implements varve.StreamLister.
func (b *Backend) ListStreams(ctx context.Context, q varve.ListQuery, buf []varve.StreamInfo) ([]varve.StreamInfo, error) {
	if err := b.begin(ctx); err != nil || q.Limit <= 0 {
		return buf, err
	}
	b.requests.Add(1)
	rows, err := b.pool.Query(ctx, listStreamsSQL(b.schema), q.Prefix, q.After, q.Limit)
	if err != nil {
		return buf, b.fail(ctx, err)
	}
	defer rows.Close()
	n := len(buf)
	for rows.Next() {
		var (
			info                varve.StreamInfo
			version, tx, seq    int64
			created, updated    time.Time
			deleted, tombstoned bool
		)
		if err := rows.Scan(&info.Stream, &version, &tx, &seq, &deleted, &tombstoned, &created, &updated); err != nil {
			return buf[:n], b.fail(ctx, err)
		}
		info.Version = varve.Version(version)
		info.LastPosition = varve.Position{Commit: uint64(tx), Seq: uint64(seq)}
		info.CreatedAt, info.UpdatedAt = created, updated
		info.Deleted, info.Tombstoned = deleted, tombstoned
		buf = append(buf, info)
	}
	if err := rows.Err(); err != nil {
		return buf[:n], b.fail(ctx, err)
	}
	return buf, nil
}

// ListCheckpoints implements varve.CheckpointLister.
func (b *Backend) ListCheckpoints(ctx context.Context, q varve.ListQuery, buf []varve.NamedPosition) ([]varve.NamedPosition, error) {
	if err := b.begin(ctx); err != nil || q.Limit <= 0 {
		return buf, err
	}
	b.requests.Add(1)
	rows, err := b.pool.Query(ctx, listCheckpointsSQL(b.schema), q.Prefix, q.After, q.Limit)
	if err != nil {
		return buf, b.fail(ctx, err)
	}
	defer rows.Close()
	n := len(buf)
	for rows.Next() {
		var (
			name        string
			commit, seq int64
		)
		if err := rows.Scan(&name, &commit, &seq); err != nil {
			return buf[:n], b.fail(ctx, err)
		}
		buf = append(buf, varve.NamedPosition{Name: name, Position: varve.Position{Commit: uint64(commit), Seq: uint64(seq)}})
	}
	if err := rows.Err(); err != nil {
		return buf[:n], b.fail(ctx, err)
	}
	return buf, nil
}
