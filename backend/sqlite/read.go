package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/varve-go/varve"
)

// read runs fn on a connection of the read pool.
func (b *Backend) read(ctx context.Context, fn func(c *conn) error) error {
	if b.closed.Load() {
		return varve.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := b.reads.get(ctx)
	if err != nil {
		return err
	}
	err = fn(c)
	b.reads.put(c, errors.Is(err, driver.ErrBadConn))
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func scanEvent(v []driver.Value, e *varve.RecordedEvent) error {
	copy(e.ID[:], asBytes(v[0]))
	e.Type = asString(v[1])
	e.Data = asBytes(v[2])
	e.Metadata = asBytes(v[3])
	e.RecordedAt = fromNanos(v[4])
	if v[5] != nil {
		if err := json.Unmarshal(asBytes(v[5]), &e.Tags); err != nil {
			return fmt.Errorf("tags of event %s: %w", e.ID, err)
		}
	}
	return nil
}

// spend takes e's bytes from a page's byte budget *left, if the page has
// one (a budget of 0 has none), and reports whether the budget is spent: a
// read stops scanning rows after e.
func spend(left *int, e *varve.RecordedEvent) bool {
	if *left <= 0 {
		return false
	}
	*left -= e.Size()
	return *left <= 0
}

// ReadStream implements [varve.Backend].
func (b *Backend) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	query, from := qReadForward, int64(min(q.From, math.MaxInt64))
	if q.Direction == varve.Backward {
		query = qReadBackward
		if q.From == 0 {
			from = math.MaxInt64
		}
	}
	var state int64 = -1
	left := q.MaxBytes
	err := b.read(ctx, func(c *conn) error {
		return c.query(ctx, query, func(v []driver.Value) error {
			state = asInt(v[0])
			if state != stateLive || v[1] == nil {
				return errStop
			}
			e := varve.RecordedEvent{
				Stream:   q.Stream,
				Version:  varve.Version(asInt(v[1])),
				Position: varve.Position{Seq: uint64(asInt(v[2]))},
			}
			err := scanEvent(v[3:], &e)
			buf = append(buf, e)
			if err == nil && spend(&left, &e) {
				return errStop
			}
			return err
		}, from, q.Stream, int64(q.Limit))
	})
	switch {
	case err != nil:
		return buf, fmt.Errorf("sqlite: read stream: %w", err)
	case state == -1 || state == stateDeleted:
		return buf, varve.ErrStreamNotFound
	case state == stateTombstoned:
		return buf, varve.ErrStreamDeleted
	}
	return buf, nil
}

// ReadAll implements [varve.Backend]. With a single writer, positions are
// assigned in commit order, so every page is a gap-free prefix of what is
// committed after q.After.
func (b *Backend) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	stmt, at := qReadAll, int64(min(q.After.Seq, math.MaxInt64))
	switch {
	case q.Direction == varve.Backward:
		stmt, at = qReadAllBackward, int64(min(q.Before.Seq, math.MaxInt64))
		if q.Before.IsZero() || q.Before.Commit > 0 {
			at = math.MaxInt64
		}
	case q.After.Commit > 0:
		// A compound position is after every position of this backend.
		return buf, nil
	}
	left := q.MaxBytes
	err := b.read(ctx, func(c *conn) error {
		return c.query(ctx, stmt, func(v []driver.Value) error {
			e := varve.RecordedEvent{
				Position: varve.Position{Seq: uint64(asInt(v[0]))},
				Stream:   asString(v[1]),
				Version:  varve.Version(asInt(v[2])),
			}
			err := scanEvent(v[3:], &e)
			buf = append(buf, e)
			if err == nil && spend(&left, &e) {
				return errStop
			}
			return err
		}, at, int64(q.Limit))
	})
	if err != nil {
		return buf, fmt.Errorf("sqlite: read $all: %w", err)
	}
	return buf, nil
}

// LastPosition implements [varve.Backend].
func (b *Backend) LastPosition(ctx context.Context) (varve.Position, error) {
	var last int64
	err := b.read(ctx, func(c *conn) error {
		_, err := c.queryRow(ctx, qLastPosition, func(v []driver.Value) { last = asInt(v[0]) })
		return err
	})
	if err != nil {
		return varve.Position{}, fmt.Errorf("sqlite: last position: %w", err)
	}
	return varve.Position{Seq: uint64(last)}, nil
}

// StreamInfo implements [varve.Backend].
func (b *Backend) StreamInfo(ctx context.Context, stream string) (varve.StreamInfo, error) {
	var s streamRow
	err := b.read(ctx, func(c *conn) (err error) {
		s, err = readStream(ctx, c, stream)
		return err
	})
	switch {
	case err != nil:
		return varve.StreamInfo{}, fmt.Errorf("sqlite: stream info: %w", err)
	case !s.exists:
		return varve.StreamInfo{}, varve.ErrStreamNotFound
	}
	return varve.StreamInfo{
		Stream:       stream,
		Version:      varve.Version(s.version),
		LastPosition: varve.Position{Seq: uint64(s.lastPos)},
		CreatedAt:    fromNanos(s.created),
		UpdatedAt:    fromNanos(s.updated),
		Deleted:      s.state != stateLive,
		Tombstoned:   s.state == stateTombstoned,
	}, nil
}

// LoadSnapshot implements [varve.SnapshotStore].
func (b *Backend) LoadSnapshot(ctx context.Context, stream string) (s varve.Snapshot, ok bool, err error) {
	err = b.read(ctx, func(c *conn) (err error) {
		ok, err = c.queryRow(ctx, qLoadSnapshot, func(v []driver.Value) {
			s = varve.Snapshot{
				Stream:        stream,
				Version:       varve.Version(asInt(v[0])),
				SchemaVersion: int(asInt(v[1])),
				Data:          asBytes(v[2]),
				TakenAt:       fromNanos(v[3]),
			}
		}, stream)
		return err
	})
	if err != nil {
		return varve.Snapshot{}, false, fmt.Errorf("sqlite: load snapshot of %q: %w", stream, err)
	}
	return s, ok, nil
}

// LoadCheckpoint implements [varve.CheckpointStore].
func (b *Backend) LoadCheckpoint(ctx context.Context, name string) (pos varve.Position, ok bool, err error) {
	err = b.read(ctx, func(c *conn) (err error) {
		ok, err = c.queryRow(ctx, qLoadCheckpoint, func(v []driver.Value) {
			pos = varve.Position{Commit: uint64(asInt(v[0])), Seq: uint64(asInt(v[1]))}
		}, name)
		return err
	})
	if err != nil {
		return varve.Position{}, false, fmt.Errorf("sqlite: load checkpoint %q: %w", name, err)
	}
	return pos, ok, nil
}
