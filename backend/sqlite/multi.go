package sqlite

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
)

// MultiAppendAvailable implements varve.MultiAppender: always.
func (b *Backend) MultiAppendAvailable() bool { return true }

// AppendMulti implements [varve.MultiAppender]: the writer applies every
// part, then the checks, under a savepoint of the batch's transaction, and
// rolls back to it when one fails.
func (b *Backend) AppendMulti(ctx context.Context, req varve.MultiAppendRequest) ([]varve.AppendResult, error) {
	o := &op{ctx: ctx, kind: opMulti, checks: req.Checks}
	for i, a := range req.Appends {
		p := &op{ctx: ctx, kind: opAppend, stream: a.Stream, category: req.Categories[i], expected: a.Expected, events: a.Events}
		o.parts = append(o.parts, p)
		o.events = append(o.events, a.Events...)
	}
	if err := b.submit(o); err != nil {
		return nil, err
	}
	res := make([]varve.AppendResult, len(o.parts))
	for i, p := range o.parts {
		res[i] = p.res
	}
	return res, nil
}

// multi applies a multi-stream append: every part commits or none does.
func (w *writer) multi(o *op) (error, bool) {
	if _, err := w.c.exec(bg, "SAVEPOINT m"); err != nil {
		return fmt.Errorf("sqlite: append: savepoint: %w", err), true
	}
	next := w.next
	undo := func(err error) (error, bool) {
		w.next = next
		if _, rerr := w.c.exec(bg, "ROLLBACK TO m"); rerr != nil {
			return fmt.Errorf("sqlite: append: roll back to savepoint: %w", rerr), true
		}
		if _, rerr := w.c.exec(bg, "RELEASE m"); rerr != nil {
			return fmt.Errorf("sqlite: append: release savepoint: %w", rerr), true
		}
		return err, false
	}
	retries := 0
	for _, p := range o.parts {
		p.res, p.retried = varve.AppendResult{}, false
		err, fatal := w.append(p)
		if fatal {
			return err, true
		}
		if err != nil {
			return undo(partError(p.stream, err))
		}
		if p.retried {
			retries++
		}
	}
	for _, c := range o.checks {
		s, err := w.stream(c.Stream)
		if err != nil {
			return fmt.Errorf("sqlite: append: read stream: %w", err), true
		}
		if s.state == stateTombstoned {
			return undo(partError(c.Stream, varve.ErrStreamDeleted))
		}
		if !c.Expected.Matches(varve.Version(s.version)) {
			return undo(&varve.WrongExpectedVersionError{Stream: c.Stream, Expected: c.Expected, Actual: varve.Version(s.version)})
		}
	}
	if retries > 0 && retries < len(o.parts) {
		for _, p := range o.parts {
			if p.retried {
				return undo(partError(p.stream, fmt.Errorf("the events of this stream were appended before, the others were not: %w", varve.ErrDuplicateEvent)))
			}
		}
	}
	if _, err := w.c.exec(bg, "RELEASE m"); err != nil {
		return fmt.Errorf("sqlite: append: release savepoint: %w", err), true
	}
	return nil, false
}

// partError names the stream of a failed part; a conflict names it
// already.
func partError(stream string, err error) error {
	if _, ok := err.(*varve.WrongExpectedVersionError); ok {
		return err
	}
	return &varve.StreamError{Stream: stream, Err: err}
}
