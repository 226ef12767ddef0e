package otelvarve

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/varve-go/varve"
)

// Wrap returns b instrumented: spans and metrics of Append, ReadStream and
// ReadAll, and of the optional capabilities that b has among filtered
// reads, multi-stream appends and Dynamic Consistency Boundaries
// (conditional appends and query reads); unless [WithoutTraceContext], the
// trace context of each append, of any kind, is stored in its events'
// metadata. The wrapper implements [varve.Unwrapper], so a Store over it
// finds exactly the optional capabilities of b; the others (snapshots,
// checkpoints, wake-ups, listings, leases) pass through without
// instrumentation. Closing it closes b.
//
// Wrap(nil) is nil, which [varve.New] refuses. An instrument that the meter
// provider refuses to create is reported to otel.Handle and left out.
func Wrap(b varve.Backend, opts ...Option) varve.Backend {
	if b == nil {
		return nil
	}
	return newBackend(b, newConfig(opts))
}

// Unwrap returns the backend under a backend that [Wrap] returned, and b
// itself for any other backend.
func Unwrap(b varve.Backend) varve.Backend {
	if w, ok := b.(*backend); ok {
		return w.inner
	}
	return b
}

type operation struct {
	hist metric.Float64Histogram
	// sets[outcome][batch range] are the attributes of a measurement, as
	// the option slice that Record takes, built once.
	sets [len(outcomes)][len(batchRanges)][]metric.RecordOption
}

func newOperation(m *meter, name, desc string, base ...attribute.KeyValue) operation {
	op := operation{hist: m.float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(durationBuckets...))}
	for i, o := range outcomes {
		for j, r := range batchRanges {
			kv := append(append([]attribute.KeyValue(nil), base...), AttrOutcome.String(o), AttrBatchSize.String(r))
			op.sets[i][j] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
		}
	}
	return op
}

func (op *operation) record(ctx context.Context, start time.Time, err error, n int) {
	op.hist.Record(ctx, time.Since(start).Seconds(), op.sets[outcomeIndex(err)][batchIndex(n)]...)
}

// backend is the instrumented Backend. Its optional capabilities are
// those of the backend it wraps, which the Store finds through Unwrap.
type backend struct {
	inner     varve.Backend
	tracer    trace.Tracer
	propagate bool
	maxEvent  int // the backend's Features().MaxEventSize

	backendAttr             attribute.KeyValue
	appendOp, streamOp, all operation
	appended, read          metric.Int64Counter
	// Option slices built once, so that a measurement allocates none.
	appendedSet, readStreamSet, readAllSet []metric.AddOption

	// The traced capabilities (capabilities.go) and what the Store finds
	// under the wrapper.
	multiOp, appendIfOp, queryOp, filteredOp operation
	readQuerySet                             []metric.AddOption
	layered                                  varve.Backend
}

func newBackend(b varve.Backend, c config) *backend {
	f := b.Features()
	w := &backend{
		inner:       b,
		tracer:      c.tp.Tracer(ScopeName),
		propagate:   c.propagate,
		maxEvent:    f.MaxEventSize,
		backendAttr: AttrBackend.String(f.Name),
	}
	m := newMeter(c.mp)
	w.appendOp = newOperation(m, "varve.append.duration", "Duration of appends to the backend.", w.backendAttr)
	w.streamOp = newOperation(m, "varve.read_stream.duration", "Duration of reads of one page of a stream.", w.backendAttr)
	w.all = newOperation(m, "varve.read_all.duration", "Duration of reads of one page of $all.", w.backendAttr)
	w.newCapabilityInstruments(m)
	w.appended = m.int64Counter("varve.events.appended", metric.WithUnit("{event}"),
		metric.WithDescription("Events appended (committed appends only)."))
	w.read = m.int64Counter("varve.events.read", metric.WithUnit("{event}"),
		metric.WithDescription("Events read from the backend, by stream reads and $all reads."))
	m.report()
	byBackend := metric.WithAttributeSet(attribute.NewSet(w.backendAttr))
	w.appendedSet = []metric.AddOption{byBackend}
	w.readStreamSet = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(w.backendAttr, AttrRead.String("stream")))}
	w.readAllSet = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(w.backendAttr, AttrRead.String("all")))}
	w.layered = w.layers()
	return w
}

// clientSpan are the start options of every span of the backend; their
// attributes are set once the span is known to record, so that a span that
// is not sampled costs no attributes.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// spanAttrs starts the attributes of a span that records, set in one call
// by end: each SetAttributes of the SDK grows the span's slice, which was
// most of what a span allocated.
func spanAttrs(span trace.Span, kv ...attribute.KeyValue) []attribute.KeyValue {
	if !span.IsRecording() {
		return nil
	}
	return append(make([]attribute.KeyValue, 0, len(kv)+4), kv...)
}

// end ends span with its attributes kv and the outcome of err.
func end(span trace.Span, kv []attribute.KeyValue, err error, n int) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(append(kv, AttrOutcome.String(Outcome(err)), AttrBatchSize.Int(n))...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (w *backend) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	return w.append(ctx, req, w.inner.Append)
}

// append traces and measures an append that do carries out.
func (w *backend) append(ctx context.Context, req varve.AppendRequest, do func(context.Context, varve.AppendRequest) (varve.AppendResult, error)) (varve.AppendResult, error) {
	start := time.Now()
	ctx, span := w.tracer.Start(ctx, SpanAppend, clientSpan...)
	var kv []attribute.KeyValue
	if span.IsRecording() {
		kv = spanAttrs(span, w.backendAttr, AttrStream.String(req.Stream), AttrExpectedVersion.String(req.Expected.String()))
	}
	if w.propagate {
		req.Events = injectEvents(req.Events, span.SpanContext(), w.maxEvent)
	}
	res, err := do(ctx, req)
	n := len(req.Events)
	w.appendOp.record(ctx, start, err, n)
	if err == nil {
		w.appended.Add(ctx, int64(n), w.appendedSet...)
		if kv != nil {
			kv = append(kv, AttrVersion.Int64(int64(res.LastVersion)), AttrPosition.String(res.Position.String()))
		}
	}
	end(span, kv, err, n)
	return res, err
}

func (w *backend) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	dir := "forward"
	if q.Direction == varve.Backward {
		dir = "backward"
	}
	return w.readStream(ctx, q.Stream, dir, buf, func(ctx context.Context) ([]varve.RecordedEvent, error) {
		return w.inner.ReadStream(ctx, q, buf)
	})
}

// readStream traces and measures a page of a stream read that do carries
// out, appending to buf.
func (w *backend) readStream(ctx context.Context, stream, dir string, buf []varve.RecordedEvent, do func(context.Context) ([]varve.RecordedEvent, error)) ([]varve.RecordedEvent, error) {
	start := time.Now()
	ctx, span := w.tracer.Start(ctx, SpanReadStream, clientSpan...)
	var kv []attribute.KeyValue
	if span.IsRecording() {
		kv = spanAttrs(span, w.backendAttr, AttrStream.String(stream), AttrDirection.String(dir))
	}
	before := len(buf)
	out, err := do(ctx)
	n := len(out) - before
	if err != nil {
		n = 0
	}
	w.streamOp.record(ctx, start, err, n)
	if n > 0 {
		w.read.Add(ctx, int64(n), w.readStreamSet...)
	}
	end(span, kv, err, n)
	return out, err
}

func (w *backend) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	start := time.Now()
	ctx, span := w.tracer.Start(ctx, SpanReadAll, clientSpan...)
	var kv []attribute.KeyValue
	if span.IsRecording() {
		kv = spanAttrs(span, w.backendAttr, AttrPosition.String(q.After.String()))
	}
	before := len(buf)
	out, err := w.inner.ReadAll(ctx, q, buf)
	n := len(out) - before
	if err != nil {
		n = 0
	}
	w.all.record(ctx, start, err, n)
	if n > 0 {
		w.read.Add(ctx, int64(n), w.readAllSet...)
	}
	end(span, kv, err, n)
	return out, err
}

func (w *backend) LastPosition(ctx context.Context) (varve.Position, error) {
	return w.inner.LastPosition(ctx)
}

func (w *backend) StreamInfo(ctx context.Context, stream string) (varve.StreamInfo, error) {
	return w.inner.StreamInfo(ctx, stream)
}

func (w *backend) Truncate(ctx context.Context, stream string, before varve.Version) error {
	return w.inner.Truncate(ctx, stream, before)
}

func (w *backend) Delete(ctx context.Context, stream string, expected varve.ExpectedVersion, tombstone bool) error {
	return w.inner.Delete(ctx, stream, expected, tombstone)
}

func (w *backend) Features() varve.Features { return w.inner.Features() }

func (w *backend) Close() error { return w.inner.Close() }

// Unwrap returns what the Store finds the optional capabilities on: the
// traced capabilities' layers over the wrapped backend.
func (w *backend) Unwrap() varve.Backend { return w.layered }
