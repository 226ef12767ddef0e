package varve

import (
	"context"
	"fmt"
)

// Snapshots is a store's snapshot capability: the latest snapshot of each
// stream (package aggregate keeps aggregate state there). Every method fails
// with [ErrNotSupported] when the backend keeps no snapshots.
type Snapshots struct {
	s *Store
	b SnapshotStore
}

// Snapshots returns the store's snapshot capability.
func (s *Store) Snapshots() Snapshots { return Snapshots{s, s.snaps} }

// Supported reports whether the backend keeps snapshots.
func (n Snapshots) Supported() bool { return n.b != nil }

func (n Snapshots) check(ctx context.Context, stream string) error {
	if err := n.s.ready(ctx); err != nil {
		return err
	}
	if n.b == nil {
		return ErrNotSupported
	}
	return checkStream(stream, true)
}

// Save replaces the snapshot of snap.Stream.
func (n Snapshots) Save(ctx context.Context, snap Snapshot) error {
	err := n.check(ctx, snap.Stream)
	if err == nil {
		err = n.b.SaveSnapshot(ctx, snap)
	}
	if err != nil {
		return fmt.Errorf("varve: save snapshot of stream %q: %w", snap.Stream, err)
	}
	return nil
}

// Load returns the snapshot of stream; ok is false when there is none.
func (n Snapshots) Load(ctx context.Context, stream string) (snap Snapshot, ok bool, err error) {
	err = n.check(ctx, stream)
	if err == nil {
		snap, ok, err = n.b.LoadSnapshot(ctx, stream)
	}
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("varve: load snapshot of stream %q: %w", stream, err)
	}
	return snap, ok, nil
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

// Supported reports whether the backend keeps checkpoints.
func (c Checkpoints) Supported() bool { return c.b != nil }

// Durable reports whether saved checkpoints survive a crash of the process.
func (c Checkpoints) Durable() bool { return c.b != nil && c.s.Features().Durable }

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

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Watch returns a channel that is closed once events may have been
// committed after the call, or once the store is closed. A wake-up may be
// spurious: read again after it. Watch returns nil when the backend cannot
// notify; a reader then polls (a nil channel never fires in a select).
func (s *Store) Watch() <-chan struct{} {
	if s.watcher == nil {
		return nil
	}
	if s.closed.Load() {
		return closedChan
	}
	return s.watcher.Watch()
}

// CanWatch reports whether [Store.Watch] wakes readers up.
func (s *Store) CanWatch() bool { return s.watcher != nil }
