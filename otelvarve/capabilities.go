package otelvarve

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/varve-go/varve"
)

// The optional capabilities that [Wrap] traces sit in layers under the
// wrapper, one per capability that the wrapped backend has: the Store
// looks for each capability down the Unwrap chain, so it finds the traced
// one exactly when the backend has it, and the others (snapshots,
// checkpoints, wake-ups, listings, leases) on the backend itself;
// snapshots kept in commits are appends and reads, and traced as such. Each
// layer embeds the backend only as a [varve.Backend], so it implements no
// capability but its own.

// layers puts the traced capabilities of w.inner under w.
func (w *backend) layers() varve.Backend {
	var b varve.Backend = w.inner
	if capabilityOf[varve.FilteredReader](w) != nil {
		b = &filteredLayer{Backend: b, w: w}
	}
	if capabilityOf[varve.TagStore](w) != nil {
		b = &tagLayer{Backend: b, w: w}
	}
	// Only when the backend's snapshots are the ones kept in commits (see
	// varve.New), not a wrapper's under w that keeps snapshots itself.
	if c, depth := capabilityAtOf[varve.CommitSnapshotStore](w); c != nil {
		if _, d := capabilityAtOf[varve.SnapshotStore](w); d == depth {
			b = &snapshotLayer{Backend: b, w: w}
		}
	}
	// A backend may have the method and find at open that it cannot serve
	// it (NATS before 2.12): then the Store must not find it either.
	if m := capabilityOf[varve.MultiAppender](w); m != nil {
		if m.MultiAppendAvailable() {
			b = &multiLayer{Backend: b, w: w}
		}
	}
	return b
}

// capabilityOf is the capability T of the backend under w: that of
// w.inner or, when w.inner wraps another, of the one under it.
func capabilityOf[T any](w *backend) T {
	c, _ := capabilityAtOf[T](w)
	return c
}

// capabilityAtOf is capabilityOf, and how many Unwraps under w.inner it
// found T (-1: nowhere).
func capabilityAtOf[T any](w *backend) (T, int) {
	var b varve.Backend = w.inner
	for depth := 0; ; depth++ {
		if c, ok := b.(T); ok {
			return c, depth
		}
		u, ok := b.(varve.Unwrapper)
		if !ok {
			var zero T
			return zero, -1
		}
		b = u.Unwrap()
	}
}

type multiLayer struct {
	varve.Backend
	w *backend
}

func (l *multiLayer) Unwrap() varve.Backend { return l.Backend }

// MultiAppendAvailable is true: the layer sits only over a backend that can.
func (l *multiLayer) MultiAppendAvailable() bool { return true }

// AppendMulti traces a multi-stream append as one span and records it as
// one append of all its events, with the streams as an attribute of the
// span; each part's events carry the span's trace context.
func (l *multiLayer) AppendMulti(ctx context.Context, req varve.MultiAppendRequest) ([]varve.AppendResult, error) {
	w := l.w
	start := time.Now()
	ctx, span := w.tracer.Start(ctx, SpanAppendMulti, clientSpan...)
	n := 0
	streams := make([]string, 0, len(req.Appends))
	for _, a := range req.Appends {
		n += len(a.Events)
		streams = append(streams, a.Stream)
	}
	kv := spanAttrs(span, w.backendAttr, AttrStreams.StringSlice(streams), AttrChecks.Int(len(req.Checks)))
	if w.propagate {
		parts := append([]varve.StreamAppend(nil), req.Appends...)
		for i := range parts {
			parts[i].Events = injectEvents(parts[i].Events, span.SpanContext(), w.maxEvent)
		}
		req.Appends = parts
	}
	res, err := capabilityOf[varve.MultiAppender](w).AppendMulti(ctx, req)
	w.multiOp.record(ctx, start, err, n)
	if err == nil {
		w.appended.Add(ctx, int64(n), w.appendedSet...)
	}
	end(span, kv, err, n)
	return res, err
}

type tagLayer struct {
	varve.Backend
	w *backend
}

func (l *tagLayer) Unwrap() varve.Backend { return l.Backend }

// AppendIf traces a conditional append: a failed condition is a conflict.
func (l *tagLayer) AppendIf(ctx context.Context, req varve.AppendRequest, cond varve.AppendCondition) (varve.AppendResult, error) {
	w := l.w
	start := time.Now()
	ctx, span := w.tracer.Start(ctx, SpanAppendIf, clientSpan...)
	var kv []attribute.KeyValue
	if span.IsRecording() {
		kv = spanAttrs(span, w.backendAttr, AttrStream.String(req.Stream), AttrExpectedVersion.String(req.Expected.String()),
			AttrPosition.String(cond.After.String()), AttrQueryItems.Int(len(cond.FailIfEventsMatch.Items)))
	}
	if w.propagate {
		req.Events = injectEvents(req.Events, span.SpanContext(), w.maxEvent)
	}
	res, err := capabilityOf[varve.TagStore](w).AppendIf(ctx, req, cond)
	n := len(req.Events)
	w.appendIfOp.record(ctx, start, err, n)
	if err == nil {
		w.appended.Add(ctx, int64(n), w.appendedSet...)
		if kv != nil {
			kv = append(kv, AttrVersion.Int64(int64(res.LastVersion)), AttrPosition.String(res.Position.String()))
		}
	}
	end(span, kv, err, n)
	return res, err
}

// ReadQuery traces a page of a query read.
func (l *tagLayer) ReadQuery(ctx context.Context, q varve.QueryRequest, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	w := l.w
	start := time.Now()
	ctx, span := w.tracer.Start(ctx, SpanReadQuery, clientSpan...)
	var kv []attribute.KeyValue
	if span.IsRecording() {
		kv = spanAttrs(span, w.backendAttr, AttrPosition.String(q.After.String()), AttrQueryItems.Int(len(q.Query.Items)))
	}
	before := len(buf)
	out, through, err := capabilityOf[varve.TagStore](w).ReadQuery(ctx, q, buf)
	n := len(out) - before
	if err != nil {
		n = 0
	}
	w.queryOp.record(ctx, start, err, n)
	if n > 0 {
		w.read.Add(ctx, int64(n), w.readQuerySet...)
	}
	end(span, kv, err, n)
	return out, through, err
}

type filteredLayer struct {
	varve.Backend
	w *backend
}

func (l *filteredLayer) Unwrap() varve.Backend { return l.Backend }

// ReadAllFiltered traces a page of a filtered $all read as a read of $all
// with the filter's parts as attributes.
func (l *filteredLayer) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	w := l.w
	start := time.Now()
	ctx, span := w.tracer.Start(ctx, SpanReadAll, clientSpan...)
	var kv []attribute.KeyValue
	if span.IsRecording() {
		kv = spanAttrs(span, w.backendAttr, AttrPosition.String(q.After.String()),
			AttrCategories.StringSlice(q.Filter.Categories), AttrEventTypes.StringSlice(q.Filter.Types), AttrStreamPrefixes.StringSlice(q.Filter.StreamPrefixes))
	}
	before := len(buf)
	out, through, err := capabilityOf[varve.FilteredReader](w).ReadAllFiltered(ctx, q, buf)
	n := len(out) - before
	if err != nil {
		n = 0
	}
	w.filteredOp.record(ctx, start, err, n)
	if n > 0 {
		w.read.Add(ctx, int64(n), w.readAllSet...)
	}
	end(span, kv, err, n)
	return out, through, err
}

type snapshotLayer struct {
	varve.Backend
	w *backend
}

func (l *snapshotLayer) Unwrap() varve.Backend { return l.Backend }

func (l *snapshotLayer) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	return capabilityOf[varve.CommitSnapshotStore](l.w).SaveSnapshot(ctx, s)
}

func (l *snapshotLayer) LoadSnapshot(ctx context.Context, stream string) (varve.Snapshot, bool, error) {
	return capabilityOf[varve.CommitSnapshotStore](l.w).LoadSnapshot(ctx, stream)
}

// AppendWithSnapshot is traced and measured as an append.
func (l *snapshotLayer) AppendWithSnapshot(ctx context.Context, req varve.AppendRequest, snap varve.Snapshot) (varve.AppendResult, error) {
	return l.w.append(ctx, req, func(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
		return capabilityOf[varve.CommitSnapshotStore](l.w).AppendWithSnapshot(ctx, req, snap)
	})
}

// ReadFromSnapshot is traced and measured as a page of a forward stream
// read.
func (l *snapshotLayer) ReadFromSnapshot(ctx context.Context, stream string, limit int, buf []varve.RecordedEvent) (varve.Snapshot, bool, []varve.RecordedEvent, error) {
	var snap varve.Snapshot
	var ok bool
	out, err := l.w.readStream(ctx, stream, "forward", buf, func(ctx context.Context) ([]varve.RecordedEvent, error) {
		var out []varve.RecordedEvent
		var err error
		snap, ok, out, err = capabilityOf[varve.CommitSnapshotStore](l.w).ReadFromSnapshot(ctx, stream, limit, buf)
		return out, err
	})
	return snap, ok, out, err
}

// newCapabilityInstruments makes the instruments of the traced
// capabilities.
func (w *backend) newCapabilityInstruments(m *meter) {
	w.multiOp = newOperation(m, "varve.append_multi.duration", "Duration of atomic appends to several streams.", w.backendAttr)
	w.appendIfOp = newOperation(m, "varve.append_if.duration", "Duration of appends under a condition (Dynamic Consistency Boundaries).", w.backendAttr)
	w.queryOp = newOperation(m, "varve.read_query.duration", "Duration of reads of one page of the events that match a query.", w.backendAttr)
	w.filteredOp = newOperation(m, "varve.read_all.duration", "Duration of reads of one page of $all.", w.backendAttr, AttrFiltered.Bool(true))
	w.readQuerySet = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(w.backendAttr, AttrRead.String("query")))}
}
