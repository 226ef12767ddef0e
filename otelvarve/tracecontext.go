package otelvarve

import (
	"bytes"
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/varve-go/varve"
)

// MetadataKey is the reserved key of an event's JSON metadata that holds the
// W3C trace context of the append that wrote the event:
//
//	{"$trace":{"traceparent":"00-<trace id>-<span id>-<flags>","tracestate":"..."}, ...}
//
// tracestate is left out when it is empty. See [InjectMetadata] for which
// metadata gets the key.
const MetadataKey = "$trace"

// traceContext is the value under MetadataKey.
type traceContext struct {
	TraceParent string `json:"traceparent"`
	TraceState  string `json:"tracestate,omitempty"`
}

// InjectMetadata returns meta with the trace context of sc under
// [MetadataKey], and whether it added it. Metadata is never broken: only
// empty metadata (which becomes a JSON object with the one key) and a
// valid JSON object without the key (which gets it as its first member,
// every other byte kept) are changed. Other JSON values, bytes that are not
// JSON and objects that already hold the key are returned as they are,
// and so is meta when sc is not valid. meta itself is never modified.
func InjectMetadata(meta []byte, sc trace.SpanContext) ([]byte, bool) {
	if !sc.IsValid() {
		return meta, false
	}
	if len(meta) == 0 {
		return append(appendMember(append(make([]byte, 0, 96), '{'), sc, false), '}'), true
	}
	i := 0
	for i < len(meta) && isSpace(meta[i]) {
		i++
	}
	if i == len(meta) || meta[i] != '{' || !json.Valid(meta) || hasKey(meta) {
		return meta, false
	}
	j := i + 1
	for j < len(meta) && isSpace(meta[j]) {
		j++
	}
	empty := meta[j] == '}'
	out := make([]byte, 0, len(meta)+96)
	out = append(out, meta[:i+1]...)
	out = appendMember(out, sc, !empty)
	return append(out, meta[i+1:]...), true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// appendMember appends `"$trace":{...}`, and a comma if more members
// follow.
func appendMember(b []byte, sc trace.SpanContext, more bool) []byte {
	b = append(b, `"`+MetadataKey+`":{"traceparent":"00-`...)
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendHex(b, tid[:])
	b = append(b, '-')
	b = appendHex(b, sid[:])
	b = append(b, '-')
	b = appendHex(b, []byte{byte(sc.TraceFlags())})
	b = append(b, '"')
	if ts := sc.TraceState().String(); ts != "" {
		q, _ := json.Marshal(ts) // a string always marshals
		b = append(b, `,"tracestate":`...)
		b = append(b, q...)
	}
	b = append(b, '}')
	if more {
		return append(b, ',')
	}
	return b
}

func appendHex(b, v []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range v {
		b = append(b, digits[c>>4], digits[c&0xf])
	}
	return b
}

// hasKey reports whether the valid JSON object meta has MetadataKey among
// its members. Only metadata that holds the key's text or an escape needs
// decoding.
func hasKey(meta []byte) bool {
	if !bytes.Contains(meta, []byte(`"`+MetadataKey+`"`)) && bytes.IndexByte(meta, '\\') < 0 {
		return false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil {
		return true // not reached for a valid object; leave it alone
	}
	_, ok := m[MetadataKey]
	return ok
}

// SpanContextFromEvent returns the trace context that the hooks of
// [NewTracer] stored in the event's metadata, marked remote; ok is false when there is none or it is
// not a valid W3C trace context.
func SpanContextFromEvent(e varve.RecordedEvent) (sc trace.SpanContext, ok bool) {
	return spanContextFromMetadata(e.Metadata)
}

func spanContextFromMetadata(meta []byte) (trace.SpanContext, bool) {
	if !bytes.Contains(meta, []byte("traceparent")) {
		return trace.SpanContext{}, false
	}
	var m struct {
		Trace *traceContext `json:"$trace"`
	}
	if json.Unmarshal(meta, &m) != nil || m.Trace == nil {
		return trace.SpanContext{}, false
	}
	carrier := propagation.MapCarrier{"traceparent": m.Trace.TraceParent}
	if m.Trace.TraceState != "" {
		carrier["tracestate"] = m.Trace.TraceState
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	return sc, sc.IsValid()
}

// ContextFromEvent returns ctx with the trace context stored in the
// event's metadata as its remote parent, so that a span started from it
// is a child of the append's span; ctx itself when the event has none.
func ContextFromEvent(ctx context.Context, e varve.RecordedEvent) context.Context {
	if sc, ok := SpanContextFromEvent(e); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}
