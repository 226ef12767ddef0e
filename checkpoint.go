package varve

import (
	"context"
	"fmt"
)

// CheckpointStore keeps named positions durably, for subscriptions. A
// backend that implements it offers checkpoints through [Store.Checkpoints];
// an application may also implement it to keep checkpoints elsewhere (see
// package subscription).
type CheckpointStore interface {
	SaveCheckpoint(ctx context.Context, name string, pos Position) error
	// LoadCheckpoint returns the saved position; ok is false if there is none.
	LoadCheckpoint(ctx context.Context, name string) (pos Position, ok bool, err error)
}

// CheckpointLister is the capability of a backend to enumerate the
// checkpoints it keeps; callers use it through [Checkpoints.List].
type CheckpointLister interface {
	// ListCheckpoints appends to buf the checkpoints of q in byte order of
	// their names. Fewer than q.Limit means there are no more.
	ListCheckpoints(ctx context.Context, q ListQuery, buf []NamedPosition) ([]NamedPosition, error)
}

// NamedPosition is a checkpoint: a position saved under a name.
type NamedPosition struct {
	Name     string
	Position Position
}

// CheckpointPage is one page of a checkpoint list.
type CheckpointPage struct {
	Checkpoints []NamedPosition
	// Next is the After of the following page; empty when this page is the
	// last.
	Next string
}

// Checkpoints is a store's checkpoint capability: named positions kept in the
// store itself, so that a consumer's progress commits where its events live.
// Every method fails with [ErrNotSupported] when the backend keeps none.
type Checkpoints struct {
	s *Store
	b CheckpointStore
}

// Checkpoints returns the store's checkpoint capability.
func (s *Store) Checkpoints() Checkpoints { return Checkpoints{s, s.cps} }

func (c Checkpoints) check(ctx context.Context, name string) error {
	if err := c.s.ready(ctx); err != nil {
		return err
	}
	if c.b == nil {
		return ErrNotSupported
	}
	return CheckName(name)
}

// Save saves pos under name.
func (c Checkpoints) Save(ctx context.Context, name string, pos Position) error {
	err := c.check(ctx, name)
	if err == nil {
		err = c.b.SaveCheckpoint(ctx, name, pos)
	}
	if err != nil {
		return fmt.Errorf("varve: save checkpoint %q: %w", name, err)
	}
	return nil
}

// Load returns the position saved under name; ok is false when there is
// none.
func (c Checkpoints) Load(ctx context.Context, name string) (pos Position, ok bool, err error) {
	err = c.check(ctx, name)
	if err == nil {
		pos, ok, err = c.b.LoadCheckpoint(ctx, name)
	}
	if err != nil {
		return Position{}, false, fmt.Errorf("varve: load checkpoint %q: %w", name, err)
	}
	return pos, ok, nil
}

// List returns a page of the checkpoints whose names begin with q.Prefix and
// sort after q.After, in byte order; q.Limit 0 means the store's page size.
// It fails with [ErrNotSupported] when the backend keeps no checkpoints or
// cannot enumerate them.
func (c Checkpoints) List(ctx context.Context, q ListQuery) (CheckpointPage, error) {
	l := c.lister()
	q, err := c.s.checkList(ctx, l != nil, q)
	if err != nil {
		return CheckpointPage{}, fmt.Errorf("varve: list checkpoints: %w", err)
	}
	got, err := l.ListCheckpoints(ctx, q, nil)
	if err != nil {
		return CheckpointPage{}, fmt.Errorf("varve: list checkpoints: %w", c.s.closedOr(err))
	}
	page := CheckpointPage{Checkpoints: got}
	if len(got) == q.Limit {
		page.Next = got[len(got)-1].Name
	}
	return page, nil
}

func (c Checkpoints) lister() CheckpointLister {
	if c.b == nil {
		return nil
	}
	return capability[CheckpointLister](c.s.b)
}
