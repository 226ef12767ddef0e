package otelvarve

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/varve-go/varve"
)

// ScopeName is the instrumentation scope of the package's tracers and
// meters.
const ScopeName = "github.com/varve-go/varve/otelvarve"

// Span names.
const (
	SpanAppend     = "varve.append"
	SpanReadStream = "varve.read_stream"
	SpanReadAll    = "varve.read_all"
	SpanDeliver    = "varve.deliver"
	// SpanAppendMulti is an atomic append to several streams.
	SpanAppendMulti = "varve.append_multi"
	// SpanAppendIf is an append under a condition (Dynamic Consistency
	// Boundaries).
	SpanAppendIf = "varve.append_if"
	// SpanReadQuery is a page of the events that match a query.
	SpanReadQuery = "varve.read_query"
)

// Attribute keys of spans and metrics.
const (
	// AttrBackend is the backend's Features().Name.
	AttrBackend = attribute.Key("varve.backend")
	// AttrOutcome is "ok", "conflict" or "error" (see [Outcome]).
	AttrOutcome = attribute.Key("varve.outcome")
	// AttrBatchSize is the number of events of an append or of a page read.
	// Spans carry the number, metrics a range ([BatchSizeRange]) so that a
	// metric has few series.
	AttrBatchSize = attribute.Key("varve.batch_size")
	// AttrStream is the stream of an append, a stream read or a delivery
	// (spans only).
	AttrStream = attribute.Key("varve.stream")
	// AttrExpectedVersion is an append's expected version (spans only).
	AttrExpectedVersion = attribute.Key("varve.expected_version")
	// AttrVersion is the stream version of an append's last event or of a
	// delivered event (spans only).
	AttrVersion = attribute.Key("varve.version")
	// AttrPosition is a global position in its text form (spans only).
	AttrPosition = attribute.Key("varve.position")
	// AttrDirection is "forward" or "backward" (stream reads).
	AttrDirection = attribute.Key("varve.direction")
	// AttrSubscription is the name of a subscription.
	AttrSubscription = attribute.Key("varve.subscription")
	// AttrAttempt counts the attempts of a delivery from 1 (spans only).
	AttrAttempt = attribute.Key("varve.attempt")
	// AttrEventType is a delivered event's type (spans only).
	AttrEventType = attribute.Key("varve.event_type")
	// AttrRepository names an aggregate repository.
	AttrRepository = attribute.Key("varve.repository")
	// AttrRead is "stream", "all" or "query": which read the events
	// counted by varve.events.read came from.
	AttrRead = attribute.Key("varve.read")
	// AttrStreams are the streams written by a multi-stream append (spans
	// only).
	AttrStreams = attribute.Key("varve.streams")
	// AttrChecks counts the streams a multi-stream append only checks
	// (spans only).
	AttrChecks = attribute.Key("varve.checks")
	// AttrQueryItems counts the items of a query or of an append's
	// condition (spans only).
	AttrQueryItems = attribute.Key("varve.query_items")
	// AttrCategories, AttrEventTypes and AttrStreamPrefixes are the parts
	// of a filtered read's filter (spans only).
	AttrCategories     = attribute.Key("varve.filter.categories")
	AttrEventTypes     = attribute.Key("varve.filter.types")
	AttrStreamPrefixes = attribute.Key("varve.filter.stream_prefixes")
	// AttrProjection and AttrProjectionVersion name a projection's runner;
	// AttrState is the state of its runner.
	AttrProjection        = attribute.Key("varve.projection")
	AttrProjectionVersion = attribute.Key("varve.projection_version")
	AttrState             = attribute.Key("varve.state")
	// AttrFiltered is true on the durations of filtered $all reads.
	AttrFiltered = attribute.Key("varve.filtered")
)

// Outcome classifies the result of an operation: "ok", "conflict" (an
// append's expected version did not match, [varve.ErrWrongExpectedVersion],
// or its condition failed, [varve.ErrAppendConditionFailed]) or "error".
func Outcome(err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, varve.ErrWrongExpectedVersion), errors.Is(err, varve.ErrAppendConditionFailed):
		return outcomeConflict
	}
	return outcomeError
}

const (
	outcomeOK       = "ok"
	outcomeConflict = "conflict"
	outcomeError    = "error"
)

var outcomes = [...]string{outcomeOK, outcomeConflict, outcomeError}

func outcomeIndex(err error) int {
	switch Outcome(err) {
	case outcomeOK:
		return 0
	case outcomeConflict:
		return 1
	}
	return 2
}

// batchRanges are the values of varve.batch_size on metrics.
var batchRanges = [...]string{"0", "1", "2-10", "11-100", "101-1000", "1001+"}

// BatchSizeRange is the value of the varve.batch_size attribute of a
// metric for a batch of n events: "0", "1", "2-10", "11-100", "101-1000" or
// "1001+".
func BatchSizeRange(n int) string { return batchRanges[batchIndex(n)] }

func batchIndex(n int) int {
	switch {
	case n <= 0:
		return 0
	case n == 1:
		return 1
	case n <= 10:
		return 2
	case n <= 100:
		return 3
	case n <= 1000:
		return 4
	}
	return 5
}

// Option configures what the package instruments and with which providers.
type Option func(*config)

type config struct {
	tp        trace.TracerProvider
	mp        metric.MeterProvider
	propagate bool
	lagLimit  int
}

func newConfig(opts []Option) config {
	c := config{propagate: true, lagLimit: DefaultLagLimit}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	return c
}

// WithTracerProvider sets the tracer provider; default the global one
// (otel.GetTracerProvider) at the time of the call.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithMeterProvider sets the meter provider; default the global one
// (otel.GetMeterProvider) at the time of the call.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithoutTraceContext keeps the hooks of [NewTracer] from writing the
// trace context into the metadata of appended events.
func WithoutTraceContext() Option { return func(c *config) { c.propagate = false } }

// DefaultLagLimit is how many events after a consumer's checkpoint
// varve.consumer.lag counts at most.
const DefaultLagLimit = 10_000

// WithLagLimit bounds the events that a collection of varve.consumer.lag
// reads; a consumer further behind shows as n. Default [DefaultLagLimit].
func WithLagLimit(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.lagLimit = n
		}
	}
}

// durationBuckets are the histogram boundaries of every duration, in
// seconds: 100µs to 10s.
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// meter creates instruments and collects the errors of their creation; an
// instrument that could not be created is a no-op one.
type meter struct {
	m    metric.Meter
	errs []error
}

func newMeter(mp metric.MeterProvider) *meter { return &meter{m: mp.Meter(ScopeName)} }

func (m *meter) check(name string, err error) {
	if err != nil {
		m.errs = append(m.errs, fmt.Errorf("otelvarve: instrument %s: %w", name, err))
	}
}

func (m *meter) float64Histogram(name string, opts ...metric.Float64HistogramOption) metric.Float64Histogram {
	h, err := m.m.Float64Histogram(name, opts...)
	m.check(name, err)
	if h == nil {
		h, _ = noopmetric.Meter{}.Float64Histogram(name)
	}
	return h
}

func (m *meter) int64Counter(name string, opts ...metric.Int64CounterOption) metric.Int64Counter {
	c, err := m.m.Int64Counter(name, opts...)
	m.check(name, err)
	if c == nil {
		c, _ = noopmetric.Meter{}.Int64Counter(name)
	}
	return c
}

// report hands the errors collected so far to otel.Handle.
func (m *meter) report() {
	if len(m.errs) > 0 {
		otel.Handle(errors.Join(m.errs...))
		m.errs = nil
	}
}
