// Package otelvarve instruments varve with OpenTelemetry: traces and
// metrics of a store's calls of its backend, trace context carried in
// event metadata from an append to each delivery of the event, and metrics
// of consumers (delivery dispatchers, aggregate repositories). It is
// opt-in: the root package, the backends and the layers above them do not
// import it, so an application that does not use OpenTelemetry does not
// compile it.
//
// [NewTracer] is the hook of a store's [varve.Config.Tracer]:
//
//	store, err := varve.New(backend, varve.Config{Tracer: otelvarve.NewTracer()})
//
// Each append (of any kind) and each page that a read asks the backend for
// gets a span and a duration measurement; an append made inside a span
// also stores the append span's W3C trace context in the event metadata
// under [MetadataKey] (see [InjectMetadata] for the format), and
// [SpanContextFromEvent] and [ContextFromEvent] read it back.
//
// [WrapSink] decorates a [delivery.Sink]: each attempt gets a span, a child
// of the append's span, whose trace context the webhook and NATS sinks of
// varve send as the traceparent and tracestate headers
// ([delivery.WithHeaders]). [ObserveDispatcher] and [ObserveRepository]
// export the counters of a dispatcher and of a repository as observable
// instruments, read when the meter provider collects.
//
// Instruments and tracers come from the global providers of package otel
// unless [WithTracerProvider] and [WithMeterProvider] say otherwise. Every
// function of the package is safe for concurrent use; the package starts no
// goroutine. docs/observability.md lists every span, metric and attribute.
package otelvarve
