package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strconv"
)

// reclaimPages bounds the pages one write of ReclaimSpace frees, so that
// appends queued behind it wait for a short transaction only.
const reclaimPages = 2048

var qIncrementalVacuum = "PRAGMA incremental_vacuum(" + strconv.Itoa(reclaimPages) + ")"

// autoVacuumIncremental is the value of PRAGMA auto_vacuum in a database
// that gives free pages back when asked.
const autoVacuumIncremental = 2

// ReclaimSpace gives the free pages of the database back to the file
// system and returns how many bytes that is: PRAGMA incremental_vacuum, on
// the writer, in transactions of at most 2048 pages each, which appends may
// come between. It does it on a database made by this package, whose
// auto_vacuum mode is INCREMENTAL; a database made before that mode was
// the default keeps its free pages for reuse by later writes, and
// ReclaimSpace returns 0 (a VACUUM converts it; see docs/retention.md). In
// WAL mode the file shrinks at the next checkpoint. Package retention's
// scavenger calls it after a pass that removed events.
func (b *Backend) ReclaimSpace(ctx context.Context) (int64, error) {
	var mode, pageSize int64
	err := b.read(ctx, func(c *conn) error {
		_, err := c.queryRow(ctx, "SELECT a.auto_vacuum, s.page_size FROM pragma_auto_vacuum() AS a, pragma_page_size() AS s",
			func(v []driver.Value) { mode, pageSize = asInt(v[0]), asInt(v[1]) })
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: reclaim space: read auto_vacuum: %w", err)
	}
	if mode != autoVacuumIncremental {
		return 0, nil
	}
	var pages int64
	for {
		o := &op{ctx: ctx, kind: opReclaim}
		if err := b.submit(o); err != nil {
			return pages * pageSize, fmt.Errorf("sqlite: reclaim space: %w", err)
		}
		pages += o.freed
		if o.freed < reclaimPages {
			return pages * pageSize, nil
		}
	}
}

// reclaim frees up to reclaimPages pages: the statement returns a row per
// page it frees.
func (w *writer) reclaim(o *op) (error, bool) {
	o.freed = 0
	err := w.c.query(bg, qIncrementalVacuum, func([]driver.Value) error {
		o.freed++
		return nil
	})
	if err != nil {
		return fmt.Errorf("incremental vacuum: %w", err), true
	}
	return nil, false
}
