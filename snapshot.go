package varve

import (
	"context"
	"fmt"
	"iter"
	"time"
)

// Snapshot is a serialized aggregate state as of a stream version.
type Snapshot struct {
	Stream        string
	Version       Version
	SchemaVersion int
	Data          []byte
	TakenAt       time.Time
}

// SnapshotStore is the snapshot capability of a backend: the latest
// snapshot per stream, dropped when the stream is deleted. Callers use it
// through [Store.Snapshots], which validates, checks for Close and wraps
// errors.
type SnapshotStore interface {
	// SaveSnapshot replaces the stream's snapshot.
	SaveSnapshot(ctx context.Context, s Snapshot) error
	// LoadSnapshot returns the stream's snapshot; ok is false if there is none.
	LoadSnapshot(ctx context.Context, stream string) (s Snapshot, ok bool, err error)
}

// CommitSnapshotStore is the capability of a [SnapshotStore] to keep a
// snapshot in the commit of the append whose state it is: stored
// atomically with the events at no request of its own, and read together
// with the events after it. The Store hands it out through
// [Snapshots.Append] and [Snapshots.Read].
type CommitSnapshotStore interface {
	SnapshotStore
	// AppendWithSnapshot is Append that keeps snap with the commit:
	// req.Expected is an exact version, and snap.Version is that version
	// plus the number of events. A retry of a stored append returns the
	// original result and keeps nothing new.
	AppendWithSnapshot(ctx context.Context, req AppendRequest, snap Snapshot) (AppendResult, error)
	// ReadFromSnapshot returns the stream's snapshot, the one kept with its
	// last commit or else the one LoadSnapshot returns, and appends to buf
	// at most limit of the events after it (from the stream's first event
	// when there is none: ok false), read together. Fewer than limit events
	// means the end of the stream. A stream that does not exist or was
	// deleted gives ErrStreamNotFound; a tombstoned one ErrStreamDeleted.
	ReadFromSnapshot(ctx context.Context, stream string, limit int, buf []RecordedEvent) (s Snapshot, ok bool, out []RecordedEvent, err error)
}

// Snapshots is a store's snapshot capability: the latest snapshot of each
// stream (package aggregate keeps aggregate state there). Every method fails
// with [ErrNotSupported] when the backend keeps no snapshots.
type Snapshots struct {
	s *Store
	b SnapshotStore
	c CommitSnapshotStore
}

// Snapshots returns the store's snapshot capability.
func (s *Store) Snapshots() Snapshots { return Snapshots{s, s.snaps, s.inline} }

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

// Append is [Store.Append] that also keeps snap, the stream's state after
// the append, in the same commit: both are stored or neither. expected
// must be an exact version ([Exact], [NoStream]), snap.Version the version
// the append reaches, and snap.Stream stream or empty; snap.Data is
// bounded like an append's bytes (Config.MaxAppendBytes). It fails with
// [ErrNotSupported] unless the store's [Capabilities] has SnapshotsInCommits.
func (n Snapshots) Append(ctx context.Context, stream string, expected ExpectedVersion, snap Snapshot, events ...Event) (AppendResult, error) {
	s := n.s
	err := s.ready(ctx)
	if err == nil {
		err = s.checkAppend(stream, expected, events, false)
	}
	switch {
	case err != nil:
	case n.c == nil:
		err = ErrNotSupported
	case expected < 0:
		err = invalid("a snapshot goes with an exact expected version, not %v", expected)
	case snap.Stream != "" && snap.Stream != stream:
		err = invalid("snapshot of stream %q", snap.Stream)
	case snap.Version != Version(expected)+Version(len(events)):
		err = invalid("snapshot at version %d, the append reaches %d", snap.Version, Version(expected)+Version(len(events)))
	case len(snap.Data) > s.cfg.MaxAppendBytes:
		err = invalid("snapshot of %d bytes, limit %d", len(snap.Data), s.cfg.MaxAppendBytes)
	}
	if err != nil {
		return AppendResult{}, fmt.Errorf("varve: append to stream %q with a snapshot: %w", stream, err)
	}
	snap.Stream = stream
	req := AppendRequest{Stream: stream, Expected: expected, Events: events, Category: s.Category(stream)}
	var res AppendResult
	if s.tr == nil {
		res, err = n.c.AppendWithSnapshot(ctx, req, snap)
	} else {
		res, err = s.appendTraced(ctx, opAppendSnapshot, req, AppendCondition{}, func(ctx context.Context, req AppendRequest) (AppendResult, error) {
			return n.c.AppendWithSnapshot(ctx, req, snap)
		})
	}
	if err != nil {
		return AppendResult{}, fmt.Errorf("varve: append to stream %q with a snapshot: %w", stream, err)
	}
	return res, nil
}

// Read returns the snapshot of stream and the events after it, or all of
// its events when it has none (ok false). The snapshot kept with the
// stream's last commit ([Snapshots.Append]) comes first, then the one of
// [Snapshots.Load]. With SnapshotsInCommits ([Capabilities]), the snapshot and the first
// page of events are read together, in one request where the backend can;
// elsewhere Read is Load and then [Store.ReadStream] from the version after
// the snapshot. [PageSize] and [PageBytes] set the pages of the events
// after a snapshot (those of a stream without one come in the store's
// pages; the first page read with a snapshot in its commit has no byte
// budget); [Limit] is not for Read. A stream without events gives an error matching
// [ErrStreamNotFound], from Read or from the events.
func (n Snapshots) Read(ctx context.Context, stream string, opts ...ReadOption) (snap Snapshot, ok bool, events iter.Seq2[RecordedEvent, error], err error) {
	s := n.s
	var p paging
	for _, o := range opts {
		o.apply(&p)
	}
	err = n.check(ctx, stream)
	if err == nil && p.limit != 0 {
		err = invalid("Limit is not an option of a snapshot read")
	}
	if err == nil {
		p, err = s.paging(p)
	}
	if err != nil {
		return Snapshot{}, false, nil, fmt.Errorf("varve: read stream %q from its snapshot: %w", stream, err)
	}
	if n.c == nil {
		if snap, ok, err = n.Load(ctx, stream); err != nil {
			return Snapshot{}, false, nil, err
		}
		if !ok {
			return Snapshot{}, false, s.ReadStream(ctx, stream), nil
		}
		return snap, true, s.ReadStream(ctx, stream, From(snap.Version+1), PageSize(p.pageSize), PageBytes(p.bytes)), nil
	}
	rctx, stop := s.readContext(ctx)
	page, err := func() ([]RecordedEvent, error) {
		defer stop()
		var page []RecordedEvent
		buf := make([]RecordedEvent, 0, p.pageSize)
		if s.tr == nil {
			snap, ok, page, err = n.c.ReadFromSnapshot(rctx, stream, p.pageSize, buf)
		} else {
			page, err = s.readTraced(rctx, TraceReadStartData{Op: opReadSnapshot, Stream: stream, Limit: p.pageSize}, 0,
				func(ctx context.Context) ([]RecordedEvent, error) {
					var page []RecordedEvent
					snap, ok, page, err = n.c.ReadFromSnapshot(ctx, stream, p.pageSize, buf)
					return page, err
				})
		}
		return page, readErr(rctx, err)
	}()
	if err != nil {
		return Snapshot{}, false, nil, fmt.Errorf("varve: read stream %q from its snapshot: %w", stream, err)
	}
	full := len(page) == p.pageSize
	if !ok {
		p.pageSize = s.cfg.PageSize
	}
	events = func(yield func(RecordedEvent, error) bool) {
		for i := range page {
			if !yield(page[i], nil) {
				return
			}
		}
		if !full {
			return
		}
		for e, err := range s.ReadStream(ctx, stream, From(page[len(page)-1].Version+1), PageSize(p.pageSize), PageBytes(p.bytes)) {
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
	return snap, ok, events, nil
}
