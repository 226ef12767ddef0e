package nats

import (
	"context"
	"fmt"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
)

// AppendWithSnapshot implements varve.CommitSnapshotStore: the snapshot is
// a section of the commit message, after the events (its format is in
// docs/backends/nats.md), so it costs the append bytes, not a request.
func (b *Backend) AppendWithSnapshot(ctx context.Context, req varve.AppendRequest, snap varve.Snapshot) (varve.AppendResult, error) {
	if req.Expected < 0 || snap.Version != varve.Version(req.Expected)+varve.Version(len(req.Events)) {
		return varve.AppendResult{}, fmt.Errorf("nats: snapshot at version %d for an append expecting %v of %d events: %w",
			snap.Version, req.Expected, len(req.Events), varve.ErrInvalidArgument)
	}
	return b.appendOne(ctx, req, &snap)
}

// headBody returns what may keep a snapshot section in the head h (message
// m): a commit's payload, or the body of a truncation marker that carried
// one on; nil for any other head.
func (b *Backend) headBody(ctx context.Context, h head, m jsclient.Msg) ([]byte, error) {
	switch {
	case h.st.isCommit():
		return b.payload(ctx, m, h.st)
	case h.st.kind == kindTruncated && len(m.Data) > stateLen:
		return m.Data[stateLen:], nil
	}
	return nil, nil
}

// ReadFromSnapshot implements varve.CommitSnapshotStore. One direct get of
// the stream's last message answers it when that commit keeps a snapshot,
// or when it is a truncation marker that carried the snapshot on (a
// chunked commit reads its chunks too). Otherwise the snapshot bucket's
// snapshot (one more get), unless it is of an earlier life of the stream,
// and the events after it, read from that head as ReadStream reads them.
func (b *Backend) ReadFromSnapshot(ctx context.Context, stream string, limit int, buf []varve.RecordedEvent) (varve.Snapshot, bool, []varve.RecordedEvent, error) {
	if err := b.ready(ctx); err != nil {
		return varve.Snapshot{}, false, buf, err
	}
	subj := b.subject(stream)
	h, m, err := b.fetchHead(ctx, stream, subj)
	if err != nil {
		return varve.Snapshot{}, false, buf, b.fail("", err)
	}
	if err := headErr(h); err != nil {
		return varve.Snapshot{}, false, buf, err
	}
	body, err := b.headBody(ctx, h, m)
	if err != nil {
		return varve.Snapshot{}, false, buf, b.fail("", err)
	}
	if body != nil {
		s, ok, err := snapshotIn(stream, body, h.st.version)
		if err != nil {
			return varve.Snapshot{}, false, buf, b.fail("", fmt.Errorf("message %d: %w", h.seq, err))
		}
		if ok {
			return s, true, buf, nil
		}
	}
	s, at, ok, err := b.loadSnapshot(ctx, stream)
	if err != nil {
		return varve.Snapshot{}, false, buf, err
	}
	from := varve.Version(1)
	switch {
	case !ok:
	case s.Version > h.st.version, at.seq != 0 && at.incarnation != h.incarnation():
		// Of a later head than this read's, or of an earlier life.
		s, ok = varve.Snapshot{}, false
	default:
		from = s.Version + 1
	}
	out, err := b.readAt(ctx, varve.StreamQuery{Stream: stream, From: from, Limit: limit}, subj, h, m, buf)
	return s, ok, out, err
}
