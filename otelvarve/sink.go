package otelvarve

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/varve-go/varve/delivery"
)

// Outcomes of a delivery attempt (the varve.outcome of its span and
// metrics): the sink took the event, failed (the dispatcher retries, or
// parks the event once its retry policy gives up), or failed for good (the
// event is parked at once, [delivery.IsPermanent]).
const (
	DeliveryOK        = "ok"
	DeliveryError     = "error"
	DeliveryPermanent = "permanent"
)

// Sink is a [delivery.Sink] under instrumentation; see [WrapSink].
type Sink struct {
	inner    delivery.Sink
	tracer   trace.Tracer
	duration metric.Float64Histogram
}

// WrapSink returns sink instrumented. Each attempt runs in a span
// varve.deliver of kind producer: a child of the span of the append that
// wrote the event when the event's metadata holds its trace context
// (the hooks of [NewTracer] store it), or, when the attempt's context already has a span, a
// child of that span linked to the append's. The span's own trace context
// goes down to sink as the traceparent and tracestate headers
// ([delivery.WithHeaders]), which the webhook and NATS sinks of varve send,
// so that the receiver's trace continues the append's. Each attempt is also
// measured in varve.delivery.duration, by subscription and outcome.
func WrapSink(sink delivery.Sink, opts ...Option) *Sink {
	c := newConfig(opts)
	m := newMeter(c.mp)
	s := &Sink{
		inner:  sink,
		tracer: c.tp.Tracer(ScopeName),
		duration: m.float64Histogram("varve.delivery.duration", metric.WithUnit("s"),
			metric.WithDescription("Duration of delivery attempts."), metric.WithExplicitBucketBoundaries(durationBuckets...)),
	}
	m.report()
	return s
}

// Deliver implements delivery.Sink.
func (s *Sink) Deliver(ctx context.Context, d delivery.Delivery) error {
	start := time.Now()
	e := &d.Event
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			AttrSubscription.String(d.Subscription), AttrStream.String(e.Stream),
			AttrVersion.Int64(int64(e.Version)), AttrPosition.String(e.Position.String()),
			AttrEventType.String(e.Type), AttrAttempt.Int(d.Attempt),
		),
	}
	if appendSC, ok := SpanContextFromEvent(d.Event); ok {
		if trace.SpanContextFromContext(ctx).IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: appendSC}))
		} else {
			ctx = trace.ContextWithRemoteSpanContext(ctx, appendSC)
		}
	}
	ctx, span := s.tracer.Start(ctx, SpanDeliver, opts...)
	defer span.End()
	if span.SpanContext().IsValid() {
		carrier := make(propagation.MapCarrier, 2)
		propagation.TraceContext{}.Inject(ctx, carrier)
		ctx = delivery.WithHeaders(ctx, carrier)
	}
	err := s.inner.Deliver(ctx, d)
	outcome := DeliveryOK
	switch {
	case delivery.IsPermanent(err):
		outcome = DeliveryPermanent
	case err != nil:
		outcome = DeliveryError
	}
	s.duration.Record(ctx, time.Since(start).Seconds(),
		metric.WithAttributeSet(attribute.NewSet(AttrSubscription.String(d.Subscription), AttrOutcome.String(outcome))))
	span.SetAttributes(AttrOutcome.String(outcome))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// Unwrap returns the sink under s.
func (s *Sink) Unwrap() delivery.Sink { return s.inner }

// String describes the sink as the sink under it.
func (s *Sink) String() string {
	if st, ok := s.inner.(fmt.Stringer); ok {
		return st.String()
	}
	return fmt.Sprintf("%T", s.inner)
}

// Close closes the sink under s if it is an io.Closer.
func (s *Sink) Close() error {
	if c, ok := s.inner.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
