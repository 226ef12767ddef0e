package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/varve-go/varve"
)

var (
	_ varve.StreamLister     = (*Backend)(nil)
	_ varve.CheckpointLister = (*Backend)(nil)
)

// Both lists walk a unique index in order (SQLite's BINARY collation is
// byte order) from the larger of the prefix and the cursor, and stop at
// the first name without the prefix.
const (
	qListStreams = `SELECT s.name, s.state, s.version, s.last_position, s.created_at, s.updated_at,
e.version, e.position, e.recorded_at
FROM streams s LEFT JOIN events e ON e.stream_id = s.id
 AND e.version = (SELECT max(x.version) FROM events x WHERE x.stream_id = s.id)
WHERE s.name >= ?1 AND s.name > ?2 ORDER BY s.name`

	qListCheckpoints = `SELECT name, commit_id, seq FROM checkpoints WHERE name >= ?1 AND name > ?2 ORDER BY name`
)

// ListStreams implements [varve.StreamLister].
func (b *Backend) ListStreams(ctx context.Context, q varve.ListQuery, buf []varve.StreamInfo) ([]varve.StreamInfo, error) {
	if q.Limit <= 0 {
		return buf, nil
	}
	n := len(buf)
	err := b.read(ctx, func(c *conn) error {
		buf = buf[:n]
		return c.query(ctx, qListStreams, func(v []driver.Value) error {
			name := asString(v[0])
			if !strings.HasPrefix(name, q.Prefix) {
				return errStop
			}
			s := streamRow{state: asInt(v[1]), version: asInt(v[2]), lastPos: asInt(v[3]), created: asInt(v[4]), updated: asInt(v[5])}
			if v[6] != nil {
				s.version, s.lastPos, s.updated = asInt(v[6]), asInt(v[7]), asInt(v[8])
			}
			buf = append(buf, varve.StreamInfo{
				Stream:       name,
				Version:      varve.Version(s.version),
				LastPosition: varve.Position{Seq: uint64(s.lastPos)},
				CreatedAt:    fromNanos(s.created),
				UpdatedAt:    fromNanos(s.updated),
				Deleted:      s.state != stateLive,
				Tombstoned:   s.state == stateTombstoned,
			})
			if len(buf)-n == q.Limit {
				return errStop
			}
			return nil
		}, q.Prefix, q.After)
	})
	if err != nil {
		return buf[:n], fmt.Errorf("sqlite: list streams: %w", err)
	}
	return buf, nil
}

// ListCheckpoints implements [varve.CheckpointLister].
func (b *Backend) ListCheckpoints(ctx context.Context, q varve.ListQuery, buf []varve.NamedPosition) ([]varve.NamedPosition, error) {
	if q.Limit <= 0 {
		return buf, nil
	}
	n := len(buf)
	err := b.read(ctx, func(c *conn) error {
		buf = buf[:n]
		return c.query(ctx, qListCheckpoints, func(v []driver.Value) error {
			name := asString(v[0])
			if !strings.HasPrefix(name, q.Prefix) {
				return errStop
			}
			buf = append(buf, varve.NamedPosition{Name: name, Position: varve.Position{Commit: uint64(asInt(v[1])), Seq: uint64(asInt(v[2]))}})
			if len(buf)-n == q.Limit {
				return errStop
			}
			return nil
		}, q.Prefix, q.After)
	})
	if err != nil {
		return buf[:n], fmt.Errorf("sqlite: list checkpoints: %w", err)
	}
	return buf, nil
}
