package otelvarve

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

func testSpanContext(t *testing.T, state string) trace.SpanContext {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}
	if state != "" {
		ts, err := trace.ParseTraceState(state)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TraceState = ts
	}
	return trace.NewSpanContext(cfg)
}

func TestInjectMetadata(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		name, meta string
		invalid    bool   // an invalid span context
		state      string // tracestate of the span context
		added      bool
		want       string // the whole result, when added
	}{
		{name: "empty", meta: "", added: true, want: `{"$trace":{"traceparent":"` + tp + `"}}`},
		{name: "empty object", meta: "{}", added: true, want: `{"$trace":{"traceparent":"` + tp + `"}}`},
		{name: "object with spaces", meta: " { \n} ", added: true, want: " {\"$trace\":{\"traceparent\":\"" + tp + "\"} \n} "},
		{name: "object", meta: `{"user":"ann","n":[1,2]}`, added: true, want: `{"$trace":{"traceparent":"` + tp + `"},"user":"ann","n":[1,2]}`},
		{name: "tracestate", meta: `{"a":1}`, state: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", added: true,
			want: `{"$trace":{"traceparent":"` + tp + `","tracestate":"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},"a":1}`},
		{name: "key already there", meta: `{"$trace":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01"}}`},
		{name: "escaped key already there", meta: `{"\u0024trace":1}`},
		{name: "array", meta: `[1,2]`},
		{name: "string", meta: `"x"`},
		{name: "not JSON", meta: "\xff\x00binary"},
		{name: "broken object", meta: `{"a":`},
		{name: "object then more", meta: `{} {}`},
		{name: "whitespace only", meta: "  "},
		{name: "no span", meta: `{"a":1}`, invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := testSpanContext(t, tc.state)
			if tc.invalid {
				sc = trace.SpanContext{}
			}
			in := []byte(tc.meta)
			keep := slices.Clone(in)
			out, added := InjectMetadata(in, sc)
			if string(in) != string(keep) {
				t.Fatalf("the metadata passed in was modified: %q", in)
			}
			if added != tc.added {
				t.Fatalf("added %v, want %v: %q", added, tc.added, out)
			}
			if !added {
				if string(out) != tc.meta {
					t.Fatalf("metadata changed to %q", out)
				}
				return
			}
			if string(out) != tc.want {
				t.Fatalf("got  %s\nwant %s", out, tc.want)
			}
			// Every member of the original is still there.
			var before, after map[string]json.RawMessage
			if tc.meta != "" {
				if err := json.Unmarshal(in, &before); err != nil {
					t.Fatal(err)
				}
			}
			if err := json.Unmarshal(out, &after); err != nil {
				t.Fatalf("result is not JSON: %v", err)
			}
			delete(after, MetadataKey)
			if !maps.EqualFunc(before, after, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
				t.Fatalf("members changed: %s -> %s", in, out)
			}
			got, ok := SpanContextFromEvent(varve.RecordedEvent{Metadata: out})
			if !ok || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || got.TraceFlags() != sc.TraceFlags() ||
				got.TraceState().String() != sc.TraceState().String() || !got.IsRemote() {
				t.Fatalf("extracted %+v (%v), want %+v", got, ok, sc)
			}
		})
	}
}

func TestSpanContextFromEventRejects(t *testing.T) {
	for _, meta := range []string{
		"", `{}`, `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`,
		`{"$trace":{"traceparent":"garbage"}}`, `{"$trace":{"traceparent":"00-00000000000000000000000000000000-b7ad6b7169203331-01"}}`,
		`{"$trace":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`, "\xfftraceparent",
	} {
		if sc, ok := SpanContextFromEvent(varve.RecordedEvent{Metadata: []byte(meta)}); ok || sc.IsValid() {
			t.Errorf("%q gave %v", meta, sc)
		}
	}
	ctx := context.Background()
	if ContextFromEvent(ctx, varve.RecordedEvent{}) != ctx {
		t.Error("ContextFromEvent changed the context of an event without trace context")
	}
}

// TestAppendStoresTraceContext: an append in a span stores the append
// span's context in each event's metadata, on every backend, keeping the
// caller's metadata and leaving the caller's slice alone; WithoutTraceContext
// stores none.
func TestAppendStoresTraceContext(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		tel := newTelemetry(t)
		s, err := varve.New(k.Backend(t), varve.Config{Tracer: NewTracer(tel.opts()...)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pctx, parent := tel.tp.Tracer("test").Start(ctx, "command")
		events := []varve.Event{
			varve.NewEvent("A", []byte(`{}`)),
			{ID: varve.NewEventID(), Type: "B", Metadata: []byte(`{"user":"ann"}`)},
			{ID: varve.NewEventID(), Type: "C", Metadata: []byte("\x00binary")},
		}
		keep := slices.Clone(events)
		first, err := s.Append(pctx, "trace-1", varve.NoStream, events...)
		if err != nil {
			t.Fatal(err)
		}
		parent.End()
		// A retry in another span (another trace context) is still a retry.
		rctx, retry := tel.tp.Tracer("test").Start(ctx, "retry")
		again, err := s.Append(rctx, "trace-1", varve.NoStream, events...)
		retry.End()
		if err != nil || again != first {
			t.Fatalf("retry through the traced store: %+v, %v; want %+v", again, err, first)
		}
		for i := range events {
			if string(events[i].Metadata) != string(keep[i].Metadata) {
				t.Fatalf("the caller's event %d was changed: %q", i, events[i].Metadata)
			}
		}
		spans := tel.ended(SpanAppend)
		if len(spans) != 2 {
			t.Fatalf("%d append spans, want the append's and the retry's", len(spans))
		}
		appendSC := spans[0].SpanContext()
		if spans[0].Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Fatalf("the append span is not a child of the caller's span")
		}
		var got []varve.RecordedEvent
		for e, err := range s.ReadStream(ctx, "trace-1") {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
		}
		if len(got) != 3 {
			t.Fatalf("read %d events", len(got))
		}
		for i, e := range got[:2] {
			sc, ok := SpanContextFromEvent(e)
			if !ok || sc.TraceID() != appendSC.TraceID() || sc.SpanID() != appendSC.SpanID() || !sc.IsSampled() {
				t.Fatalf("event %d: stored %v (%v), want the append span %v; metadata %s", i, sc, ok, appendSC, e.Metadata)
			}
		}
		if !strings.Contains(string(got[1].Metadata), `"user":"ann"`) {
			t.Fatalf("the caller's metadata is lost: %s", got[1].Metadata)
		}
		if string(got[2].Metadata) != "\x00binary" {
			t.Fatalf("binary metadata was changed: %q", got[2].Metadata)
		}

		off, err := varve.New(k.Backend(t), varve.Config{Tracer: NewTracer(append(tel.opts(), WithoutTraceContext())...)})
		if err != nil {
			t.Fatal(err)
		}
		defer off.Close()
		pctx, parent = tel.tp.Tracer("test").Start(ctx, "command")
		if _, err := off.Append(pctx, "trace-2", varve.NoStream, varve.NewEvent("A", nil)); err != nil {
			t.Fatal(err)
		}
		parent.End()
		for e, err := range off.ReadStream(ctx, "trace-2") {
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Metadata) != 0 {
				t.Fatalf("WithoutTraceContext stored metadata %s", e.Metadata)
			}
		}
	})
}

// TestTraceContextWithinLimits: an event that the trace context would
// take past the store's MaxEventSize, or an append past MaxAppendBytes, is
// stored without it, and the append commits.
func TestTraceContextWithinLimits(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	s := teststore.Kinds[0].Open(t, varve.Config{Tracer: NewTracer(tel.opts()...), MaxEventSize: 200, MaxAppendBytes: 342})
	pctx, parent := tel.tp.Tracer("test").Start(ctx, "command")
	defer parent.End()
	events := []varve.Event{
		{ID: varve.NewEventID(), Type: "Big", Data: make([]byte, 190)},
		{ID: varve.NewEventID(), Type: "Small", Data: []byte(`{}`)},
		{ID: varve.NewEventID(), Type: "Last", Data: make([]byte, 50)},
	}
	if _, err := s.Append(pctx, "limits-1", varve.NoStream, events...); err != nil {
		t.Fatal(err)
	}
	var got []bool
	for e, err := range s.ReadStream(ctx, "limits-1") {
		if err != nil {
			t.Fatal(err)
		}
		_, ok := SpanContextFromEvent(e)
		got = append(got, ok)
	}
	// 190 bytes of data leave no room for the context (84 bytes) within
	// MaxEventSize; the events' 242 bytes, room for one within
	// MaxAppendBytes.
	if !slices.Equal(got, []bool{false, true, false}) {
		t.Fatalf("trace context stored: %v, want [false true false]", got)
	}
}
