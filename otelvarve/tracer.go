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

// NewTracer returns the hook that instruments a store: pass it as
// [varve.Config.Tracer]. Each append of any kind and each page a read asks
// the backend for gets a span and a duration measurement, and unless
// [WithoutTraceContext], the trace context of each append is stored in its
// events' metadata ([varve.MetadataInjector]).
//
// It is a [varve.StoreTracer]: each store made with it gets
// instruments labelled with its backend's name, so one Config may serve
// several stores. An instrument that the meter provider refuses to create
// is reported to otel.Handle when the store is made, and left out.
func NewTracer(opts ...Option) varve.StoreTracer { return tracer{c: newConfig(opts)} }

type tracer struct{ c config }

// TracerFor returns the hooks of a store over a backend with features f.
func (t tracer) TracerFor(f varve.Features) any {
	h := newHooks(f, t.c)
	if t.c.propagate {
		return propagating{h}
	}
	return h
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

func (op *operation) record(ctx context.Context, d time.Duration, err error, n int) {
	op.hist.Record(ctx, d.Seconds(), op.sets[outcomeIndex(err)][batchIndex(n)]...)
}

// hooks are the [varve.AppendTracer] and [varve.ReadTracer] of one store.
type hooks struct {
	tracer      trace.Tracer
	backendAttr attribute.KeyValue

	appendOp, appendIfOp, multiOp          operation
	streamOp, allOp, filteredOp, queryOp   operation
	appended, read                         metric.Int64Counter
	appendedSet, readStreamSet, readAllSet []metric.AddOption
	readQuerySet                           []metric.AddOption
}

// propagating are hooks that also store the trace context of appends in
// their events' metadata.
type propagating struct{ *hooks }

func newHooks(f varve.Features, c config) *hooks {
	h := &hooks{tracer: c.tp.Tracer(ScopeName), backendAttr: AttrBackend.String(f.Name)}
	m := newMeter(c.mp)
	h.appendOp = newOperation(m, "varve.append.duration", "Duration of appends to the backend.", h.backendAttr)
	h.appendIfOp = newOperation(m, "varve.append_if.duration", "Duration of appends under a condition (Dynamic Consistency Boundaries).", h.backendAttr)
	h.multiOp = newOperation(m, "varve.append_multi.duration", "Duration of atomic appends to several streams.", h.backendAttr)
	h.streamOp = newOperation(m, "varve.read_stream.duration", "Duration of reads of one page of a stream.", h.backendAttr)
	h.allOp = newOperation(m, "varve.read_all.duration", "Duration of reads of one page of $all.", h.backendAttr)
	h.filteredOp = newOperation(m, "varve.read_all.duration", "Duration of reads of one page of $all.", h.backendAttr, AttrFiltered.Bool(true))
	h.queryOp = newOperation(m, "varve.read_query.duration", "Duration of reads of one page of the events that match a query.", h.backendAttr)
	h.appended = m.int64Counter("varve.events.appended", metric.WithUnit("{event}"),
		metric.WithDescription("Events appended (committed appends only)."))
	h.read = m.int64Counter("varve.events.read", metric.WithUnit("{event}"),
		metric.WithDescription("Events read from the backend, by stream reads and $all reads."))
	m.report()
	h.appendedSet = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(h.backendAttr))}
	h.readStreamSet = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(h.backendAttr, AttrRead.String("stream")))}
	h.readAllSet = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(h.backendAttr, AttrRead.String("all")))}
	h.readQuerySet = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(h.backendAttr, AttrRead.String("query")))}
	return h
}

// clientSpan are the start options of every span of a store; their
// attributes are set once the span is known to record, so that a span that
// is not sampled costs no attributes.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// end ends span with its attributes kv and the outcome of err, setting the
// attributes in one call: each SetAttributes of the SDK grows the span's
// slice, which was most of what a span allocated.
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

// attrCap is how many attributes a span of the operation op gets, end's
// two included.
func attrCap(op string) int {
	switch op {
	case "append_if":
		return 9
	case "append", "append_snapshot", "read_filtered":
		return 7
	case "append_multi", "read_stream", "read_snapshot", "read_query":
		return 5
	case "read_all":
		return 4
	}
	return 10
}

// TraceAppendStart starts the span of an append: varve.append (appends to
// one stream, with or without a snapshot), varve.append_if or
// varve.append_multi.
func (h *hooks) TraceAppendStart(ctx context.Context, d varve.TraceAppendStartData) context.Context {
	name := SpanAppend
	switch d.Op {
	case "append_if":
		name = SpanAppendIf
	case "append_multi":
		name = SpanAppendMulti
	}
	ctx, _ = h.tracer.Start(ctx, name, clientSpan...)
	return ctx
}

// TraceAppendEnd measures an append and ends its span.
func (h *hooks) TraceAppendEnd(ctx context.Context, d varve.TraceAppendEndData) {
	op, s := &h.appendOp, &d.Start
	switch s.Op {
	case "append_if":
		op = &h.appendIfOp
	case "append_multi":
		op = &h.multiOp
	}
	op.record(ctx, d.Duration, d.Err, d.Events)
	if d.Err == nil {
		h.appended.Add(ctx, int64(d.Events), h.appendedSet...)
	}
	span := trace.SpanFromContext(ctx)
	var kv []attribute.KeyValue
	if span.IsRecording() {
		// Room for every attribute, end's two included.
		kv = make([]attribute.KeyValue, 0, attrCap(s.Op))
		kv = append(kv, h.backendAttr)
		switch s.Op {
		case "append_multi":
			streams := make([]string, len(s.Appends))
			for i, a := range s.Appends {
				streams[i] = a.Stream
			}
			kv = append(kv, AttrStreams.StringSlice(streams), AttrChecks.Int(len(s.Checks)))
		case "append_if":
			kv = append(kv, AttrStream.String(s.Stream), AttrExpectedVersion.String(s.Expected.String()),
				AttrPosition.String(s.Condition.After.String()), AttrQueryItems.Int(len(s.Condition.FailIfEventsMatch.Items)))
		default:
			kv = append(kv, AttrStream.String(s.Stream), AttrExpectedVersion.String(s.Expected.String()))
		}
		if d.Err == nil && s.Op != "append_multi" {
			kv = append(kv, AttrVersion.Int64(int64(d.Result.LastVersion)), AttrPosition.String(d.Result.Position.String()))
		}
	}
	end(span, kv, d.Err, d.Events)
}

// TraceReadStart starts the span of a page: varve.read_stream (a page of
// a stream, or a snapshot and the events after it), varve.read_all
// (filtered or not) or varve.read_query.
func (h *hooks) TraceReadStart(ctx context.Context, d varve.TraceReadStartData) context.Context {
	name := SpanReadAll
	switch d.Op {
	case "read_stream", "read_snapshot":
		name = SpanReadStream
	case "read_query":
		name = SpanReadQuery
	}
	ctx, _ = h.tracer.Start(ctx, name, clientSpan...)
	return ctx
}

// TraceReadEnd measures a page and ends its span.
func (h *hooks) TraceReadEnd(ctx context.Context, d varve.TraceReadEndData) {
	s := &d.Start
	op, set := &h.allOp, h.readAllSet
	switch s.Op {
	case "read_stream", "read_snapshot":
		op, set = &h.streamOp, h.readStreamSet
	case "read_filtered":
		op = &h.filteredOp
	case "read_query":
		op, set = &h.queryOp, h.readQuerySet
	}
	n := len(d.Page)
	op.record(ctx, d.Duration, d.Err, n)
	if n > 0 {
		h.read.Add(ctx, int64(n), set...)
	}
	span := trace.SpanFromContext(ctx)
	var kv []attribute.KeyValue
	if span.IsRecording() {
		kv = make([]attribute.KeyValue, 0, attrCap(s.Op))
		kv = append(kv, h.backendAttr)
		switch s.Op {
		case "read_stream", "read_snapshot":
			dir := "forward"
			if s.Direction == varve.Backward {
				dir = "backward"
			}
			kv = append(kv, AttrStream.String(s.Stream), AttrDirection.String(dir))
		case "read_filtered":
			kv = append(kv, AttrPosition.String(s.After.String()), AttrCategories.StringSlice(s.Filter.Categories),
				AttrEventTypes.StringSlice(s.Filter.Types), AttrStreamPrefixes.StringSlice(s.Filter.StreamPrefixes))
		case "read_query":
			kv = append(kv, AttrPosition.String(s.After.String()), AttrQueryItems.Int(len(s.Query.Items)))
		default:
			kv = append(kv, AttrPosition.String(s.After.String()))
		}
	}
	end(span, kv, d.Err, n)
}

// InjectMetadata stores the trace context of the append's span in meta
// ([InjectMetadata]) when the result fits within limit.
func (p propagating) InjectMetadata(ctx context.Context, meta []byte, limit int) []byte {
	out, ok := InjectMetadata(meta, trace.SpanContextFromContext(ctx))
	if !ok || len(out) > limit {
		return meta
	}
	return out
}
