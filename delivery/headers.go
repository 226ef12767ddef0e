package delivery

import (
	"context"
	"maps"
)

// Headers that the sinks of varve set on what they send, whatever the
// transport: the idempotency key ([Delivery.Key]), the attempt, and where
// the event is in the store.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderAttempt        = "Varve-Attempt"
	HeaderStream         = "Varve-Stream"
	HeaderVersion        = "Varve-Version"
	HeaderType           = "Varve-Type"
	HeaderPosition       = "Varve-Position"
)

type headersKey struct{}

// WithHeaders returns ctx carrying headers for the sinks of varve to send
// with a delivery, added to those ctx already carries: the webhook sink
// sets them on its request, the NATS sink on its message, each before its
// own headers, which win. A decorator of a [Sink] passes them down this
// way; package otelvarve sends the W3C traceparent so.
func WithHeaders(ctx context.Context, h map[string]string) context.Context {
	if len(h) == 0 {
		return ctx
	}
	if old := HeadersFrom(ctx); len(old) > 0 {
		merged := maps.Clone(old)
		maps.Copy(merged, h)
		h = merged
	}
	return context.WithValue(ctx, headersKey{}, h)
}

// HeadersFrom returns the headers that ctx carries ([WithHeaders]); nil if
// none. The map must not be modified.
func HeadersFrom(ctx context.Context) map[string]string {
	h, _ := ctx.Value(headersKey{}).(map[string]string)
	return h
}
