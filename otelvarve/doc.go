// Package otelvarve instruments varve with OpenTelemetry: traces and
// metrics of a store's backend, trace context carried in event metadata
// from an append to each delivery of the event, and metrics of consumers
// (delivery dispatchers, aggregate repositories). It is opt-in: the root
// package, the backends and the layers above them do not import it, so an
// application that does not use OpenTelemetry does not compile it.
//
// [Wrap] decorates a [varve.Backend]; pass the result to [varve.New]:
//
//	store, err := varve.New(otelvarve.Wrap(backend), varve.Config{})
//
// The Store finds the optional capabilities of the backend under the
// wrapper ([varve.Unwrapper]), so it offers the same ones. Each Append, ReadStream page and ReadAll page gets a span and a
// duration measurement; an Append made inside a span also stores the
// append span's W3C trace context in the event metadata under [MetadataKey]
// (see [InjectMetadata] for the format), and [SpanContextFromEvent] and
// [ContextFromEvent] read it back.
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
