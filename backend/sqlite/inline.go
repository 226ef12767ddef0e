package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/varve-go/varve"
)

// InlineFunc is an inline projection ([Config.Inline]): it writes a read
// model in tx, the transaction of the append that wrote events, so that
// the read model and the events commit together or not at all.
//
// events are the events that append wrote, in position order, with their
// stream, version, position and time: one stream's, or several streams'
// for a multi-stream append. That includes varve's own system streams
// (names starting with "$"): filter on Stream. An append recognised as an
// exact retry of a committed one writes nothing and does not call the
// hook; nor does an append that fails.
//
// When the hook returns an error (or panics), the append fails with an
// error that wraps [varve.ErrInline] and the hook's error, and neither the
// events nor the hook's writes commit; the other writes of the group
// commit are not affected. The hook runs on the writer goroutine, in a
// savepoint of the group commit, as a [Backend.WriteTx] fn does, and the
// same rules apply: it must not commit or roll back tx, keep it, or call
// the backend's write methods; it may run more than once when a storage
// error makes the writer commit the group again (the writes of one run
// commit); and every write of the store waits for it, so keep it short.
// ctx is the append's.
type InlineFunc func(ctx context.Context, tx *sql.Tx, events []varve.RecordedEvent) error

// inline applies an append (apply: append, appendIf or multi) and then the
// inline hook, in a savepoint that undoes both when the hook fails.
func (w *writer) inline(o *op, apply func(*op) (error, bool)) (error, bool) {
	if _, err := w.c.exec(bg, "SAVEPOINT inline"); err != nil {
		return fmt.Errorf("sqlite: append: savepoint: %w", err), true
	}
	next := w.next
	release := func(err error) (error, bool) {
		if _, rerr := w.c.exec(bg, "RELEASE inline"); rerr != nil {
			return fmt.Errorf("sqlite: append: release savepoint: %w", rerr), true
		}
		return err, false
	}
	err, fatal := apply(o)
	if fatal {
		return err, true
	}
	var evs []varve.RecordedEvent
	if err == nil {
		evs = w.recorded(o)
	}
	if len(evs) == 0 {
		return release(err)
	}
	tx, err := w.b.txdb.write.BeginTx(bg, nil)
	if err != nil {
		return fmt.Errorf("sqlite: inline projection: begin: %w", err), true
	}
	herr := callTx(func(tx *sql.Tx) error { return w.b.cfg.Inline(o.ctx, tx, evs) }, tx)
	if herr == nil {
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlite: inline projection: %w", err), true
		}
		return release(nil)
	}
	if err := tx.Rollback(); err != nil {
		return fmt.Errorf("sqlite: inline projection: %w (roll back: %w)", herr, err), true
	}
	w.next = next
	if _, err := w.c.exec(bg, "ROLLBACK TO inline"); err != nil {
		return fmt.Errorf("sqlite: append: roll back to savepoint: %w", err), true
	}
	o.res = varve.AppendResult{}
	for _, p := range o.parts {
		p.res = varve.AppendResult{}
	}
	return release(fmt.Errorf("sqlite: %w: %w", varve.ErrInline, herr))
}

// recorded returns the events that o, a successful append, wrote: none
// when it was a retry.
func (w *writer) recorded(o *op) []varve.RecordedEvent {
	parts := o.parts
	if o.kind != opMulti {
		parts = []*op{o}
	}
	n := 0
	for _, p := range parts {
		if !p.retried {
			n += len(p.events)
		}
	}
	if n == 0 {
		return nil
	}
	at := fromNanos(w.now)
	evs := make([]varve.RecordedEvent, 0, n)
	for _, p := range parts {
		if p.retried {
			continue
		}
		first := p.res.Position.Seq - uint64(len(p.events)) + 1
		for i, e := range p.events {
			evs = append(evs, varve.RecordedEvent{
				ID: e.ID, Type: e.Type, Data: e.Data, Metadata: e.Metadata, Tags: e.Tags,
				Stream: p.stream, Version: p.res.FirstVersion + varve.Version(i),
				Position: varve.Position{Seq: first + uint64(i)}, RecordedAt: at,
			})
		}
	}
	return evs
}
