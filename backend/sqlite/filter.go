package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/varve-go/varve"
)

// A filtered read is one branch per value of the indexed list (the
// categories, or else the types), each a range scan of its index in
// position order, merged by position (a compound SELECT's MERGE, which
// reads each branch lazily and stops at the page's limit). The rest
// of the filter is checked in each branch, from JSON arrays (NULL when the
// filter has no such list), so that the statement's text depends only on
// the indexed column and the number of values, and the prepared statements
// a connection keeps stay few. Parameters: ?1 after, ?2 limit, ?3 types,
// ?4 stream prefixes, then the indexed values.
var filteredSQL sync.Map // filterShape -> string

type filterShape struct {
	col string // "category", "type" or "" for a scan of the log
	n   int
}

func (k filterShape) sql() string {
	if q, ok := filteredSQL.Load(k); ok {
		return q.(string)
	}
	const cols = `e.position, s.name, e.version, e.event_id, e.type, e.data, e.metadata, e.recorded_at, e.tags`
	const rest = ` AND (?3 IS NULL OR e.type IN (SELECT value FROM json_each(?3)))
 AND (?4 IS NULL OR EXISTS (SELECT 1 FROM json_each(?4) p WHERE substr(s.name, 1, length(p.value)) = p.value))`
	var q string
	if k.col == "" {
		q = `SELECT ` + cols + ` FROM events e CROSS JOIN streams s ON s.id = e.stream_id
WHERE e.position > ?1` + rest + ` ORDER BY e.position LIMIT ?2`
	} else {
		branches := make([]string, k.n)
		for i := range branches {
			branches[i] = `SELECT ` + cols + ` FROM events e CROSS JOIN streams s ON s.id = e.stream_id
WHERE e.` + k.col + ` = ?` + strconv.Itoa(5+i) + ` AND e.position > ?1` + rest
		}
		q = strings.Join(branches, "\nUNION ALL\n") + "\nORDER BY 1 LIMIT ?2"
	}
	filteredSQL.Store(k, q)
	return q
}

func jsonList(vs []string) (driver.Value, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(vs)
	return string(b), err
}

// ReadAllFiltered implements [varve.FilteredReader]. It reads the last
// position before the page: every event at or before it is committed and
// in the page's snapshot, and every later event is after it.
func (b *Backend) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	if q.After.Commit > 0 {
		return buf, q.After, nil
	}
	f := q.Filter
	shape := filterShape{}
	var values []string
	switch {
	case len(f.Categories) > 0:
		shape, values = filterShape{"category", len(f.Categories)}, f.Categories
	case len(f.Types) > 0:
		shape, values, f.Types = filterShape{"type", len(f.Types)}, f.Types, nil
	}
	types, err := jsonList(f.Types)
	if err != nil {
		return buf, varve.Position{}, err
	}
	prefixes, err := jsonList(f.StreamPrefixes)
	if err != nil {
		return buf, varve.Position{}, err
	}
	args := []driver.Value{int64(min(q.After.Seq, math.MaxInt64)), int64(q.Limit), types, prefixes}
	for _, v := range values {
		args = append(args, v)
	}
	var last int64
	left := q.MaxBytes
	err = b.read(ctx, func(c *conn) error {
		if _, err := c.queryRow(ctx, qLastPosition, func(v []driver.Value) { last = asInt(v[0]) }); err != nil {
			return err
		}
		return c.query(ctx, shape.sql(), func(v []driver.Value) error {
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
		}, args...)
	})
	if err != nil {
		return buf, varve.Position{}, fmt.Errorf("sqlite: read $all filtered: %w", err)
	}
	return buf, varve.Position{Seq: uint64(last)}, nil
}
