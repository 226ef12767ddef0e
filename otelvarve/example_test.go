package otelvarve_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/otelvarve"
)

func Example() {
	ctx := context.Background()
	// An application sets up its providers once, usually as the global
	// ones (otel.SetTracerProvider); this one keeps spans and metrics in
	// memory.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	tracer := otelvarve.NewTracer(otelvarve.WithTracerProvider(tp), otelvarve.WithMeterProvider(mp))
	store, err := varve.New(memory.New(), varve.Config{Tracer: tracer})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	cmdCtx, cmd := tp.Tracer("shop").Start(ctx, "place order")
	if _, err := store.Append(cmdCtx, "order-1", varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{"total":40}`))); err != nil {
		panic(err)
	}
	cmd.End()

	for e, err := range store.ReadStream(ctx, "order-1") {
		if err != nil {
			panic(err)
		}
		sc, ok := otelvarve.SpanContextFromEvent(e)
		fmt.Println(e.Type, "carries the command's trace:", ok && sc.TraceID() == cmd.SpanContext().TraceID())
	}
	for _, s := range spans.Ended() {
		fmt.Println("span", s.Name())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	var names []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names = append(names, m.Name)
		}
	}
	slices.Sort(names)
	fmt.Println("metrics", strings.Join(names, " "))
	// Output:
	// OrderPlaced carries the command's trace: true
	// span varve.append
	// span place order
	// span varve.read_stream
	// metrics varve.append.duration varve.events.appended varve.events.read varve.read_stream.duration
}

func ExampleWrapSink() {
	ctx := context.Background()
	tp := sdktrace.NewTracerProvider()
	store, _ := varve.New(memory.New(), varve.Config{Tracer: otelvarve.NewTracer(otelvarve.WithTracerProvider(tp))})
	defer store.Close()
	cmdCtx, cmd := tp.Tracer("shop").Start(ctx, "place order")
	store.Append(cmdCtx, "order-1", varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{}`)))
	cmd.End()

	// The webhook and NATS sinks send the headers of delivery.HeadersFrom;
	// this sink prints whether the traceparent is in the command's trace.
	sink := otelvarve.WrapSink(delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		tp := delivery.HeadersFrom(ctx)["traceparent"]
		fmt.Println(d.Event.Type, strings.Contains(tp, cmd.SpanContext().TraceID().String()))
		return nil
	}), otelvarve.WithTracerProvider(tp))
	for e, err := range store.ReadAll(ctx, varve.Start) {
		if err != nil {
			panic(err)
		}
		_ = sink.Deliver(ctx, delivery.Delivery{Subscription: "mails", Event: e, Attempt: 1, Key: delivery.Key("mails", e.Position)})
	}
	// Output:
	// OrderPlaced true
}
