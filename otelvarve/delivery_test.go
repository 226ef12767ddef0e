package otelvarve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/natssink"
	"github.com/varve-go/varve/delivery/webhook"
	"github.com/varve-go/varve/internal/testenv"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/subscription"
)

// run runs a dispatcher of a new subscription name on s to sink until the
// test ends, and returns it with its subscription.
func run(t *testing.T, s *varve.Store, name string, sink delivery.Sink, cfg delivery.Config) (*delivery.Dispatcher, *subscription.Subscription) {
	t.Helper()
	sub, err := subscription.Open(context.Background(), s, subscription.Config{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := delivery.New(sub, sink, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return d, sub
}

func waitFor(t *testing.T, d *delivery.Dispatcher, pos varve.Position) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a hang
	defer cancel()
	if err := d.WaitFor(ctx, pos); err != nil {
		t.Fatalf("wait for %v: %v (stats %+v)", pos, err, d.Stats())
	}
}

// request is what the test's webhook endpoint saw.
type request struct {
	stream      string
	attempt     int
	traceparent string
}

func parseTraceparent(t *testing.T, v string) trace.SpanContext {
	t.Helper()
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": v}))
	if !sc.IsValid() {
		t.Fatalf("traceparent %q is not valid", v)
	}
	return sc
}

// TestWebhookDeliveryTrace appends three events, each in a span of its own,
// and delivers them to a webhook on a loopback HTTP server that takes the
// first, fails the second once, and rejects the third. Each request's
// traceparent is in the trace of the event's append, with the attempt's
// varve.deliver span as parent; that span is the append span's child and
// says the outcome; the dispatcher's metrics count the retry and the park.
func TestWebhookDeliveryTrace(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		tel := newTelemetry(t)
		s, err := varve.New(k.Backend(t), varve.Config{Tracer: NewTracer(tel.opts()...)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() }) // after the dispatcher stops

		var mu sync.Mutex
		var got []request
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			stream := streamOf(body)
			attempt, _ := strconv.Atoi(r.Header.Get(delivery.HeaderAttempt))
			mu.Lock()
			got = append(got, request{stream: stream, attempt: attempt, traceparent: r.Header.Get("traceparent")})
			mu.Unlock()
			switch {
			case stream == "retry-1" && attempt == 1:
				w.WriteHeader(http.StatusInternalServerError)
			case stream == "poison-1":
				w.WriteHeader(http.StatusBadRequest)
			}
		}))
		defer srv.Close()

		appendSpans := map[string]trace.SpanContext{} // by stream
		var last varve.Position
		for _, stream := range []string{"ok-1", "retry-1", "poison-1"} {
			cctx, cmd := tel.tp.Tracer("test").Start(ctx, "command "+stream)
			res, err := s.Append(cctx, stream, varve.NoStream, varve.NewEvent("Happened", []byte(`{}`)))
			cmd.End()
			if err != nil {
				t.Fatal(err)
			}
			last = res.Position
			spans := tel.ended(SpanAppend)
			appendSpans[stream] = spans[len(spans)-1].SpanContext()
			if spans[len(spans)-1].Parent().SpanID() != cmd.SpanContext().SpanID() {
				t.Fatalf("the append span of %s is not the command's child", stream)
			}
		}

		hook, err := webhook.New(webhook.Config{URL: srv.URL, Secret: []byte("s3cret")})
		if err != nil {
			t.Fatal(err)
		}
		sink := WrapSink(hook, tel.opts()...)
		defer sink.Close()
		d, sub := run(t, s, "hooks", sink, delivery.Config{Concurrency: 4,
			Retry: subscription.RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
		reg, err := ObserveDispatcher(sub, d, tel.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Unregister()
		waitFor(t, d, last)

		deliverSpans := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, sp := range tel.ended(SpanDeliver) {
			deliverSpans[sp.SpanContext().SpanID()] = sp
		}
		mu.Lock()
		requests := append([]request(nil), got...)
		mu.Unlock()
		wantOutcome := map[string][]string{"ok-1": {DeliveryOK}, "retry-1": {DeliveryError, DeliveryOK}, "poison-1": {DeliveryPermanent}}
		seen := map[string]int{}
		for _, r := range requests {
			if r.traceparent == "" {
				t.Fatalf("request of %s attempt %d came without traceparent", r.stream, r.attempt)
			}
			sc := parseTraceparent(t, r.traceparent)
			app := appendSpans[r.stream]
			if sc.TraceID() != app.TraceID() {
				t.Fatalf("%s attempt %d: traceparent %s is not in the append's trace %s", r.stream, r.attempt, r.traceparent, app.TraceID())
			}
			sp, ok := deliverSpans[sc.SpanID()]
			if !ok {
				t.Fatalf("%s attempt %d: traceparent %s names no varve.deliver span", r.stream, r.attempt, r.traceparent)
			}
			if sp.Parent().SpanID() != app.SpanID() || !sp.Parent().IsRemote() {
				t.Fatalf("%s: the deliver span's parent is %v, want the append span %v (remote)", r.stream, sp.Parent(), app)
			}
			a := attrs(sp.Attributes())
			want := map[attribute.Key]string{
				AttrSubscription: "hooks", AttrStream: r.stream, AttrAttempt: strconv.Itoa(r.attempt), AttrEventType: "Happened",
				AttrOutcome: wantOutcome[r.stream][r.attempt-1],
			}
			for key, v := range want {
				if a[key] != v {
					t.Errorf("%s attempt %d: span attribute %s = %q, want %q", r.stream, r.attempt, key, a[key], v)
				}
			}
			if sp.SpanKind() != trace.SpanKindProducer {
				t.Errorf("deliver span kind %v", sp.SpanKind())
			}
			seen[r.stream]++
		}
		for stream, outcomes := range wantOutcome {
			if seen[stream] != len(outcomes) {
				t.Errorf("%s: %d requests, want %d (%+v)", stream, seen[stream], len(outcomes), requests)
			}
		}

		ms := tel.collect(t)
		hooks := map[attribute.Key]string{AttrSubscription: "hooks"}
		for name, want := range map[string]int64{
			"varve.delivery.events.read": 3, "varve.delivery.events.delivered": 2, "varve.delivery.events.parked": 1,
			"varve.delivery.attempts": 4, "varve.delivery.retries": 1,
		} {
			if v := sum(t, ms, name, hooks); v != want {
				t.Errorf("%s = %d, want %d", name, v, want)
			}
		}
		for outcome, want := range map[string]uint64{DeliveryOK: 2, DeliveryError: 1, DeliveryPermanent: 1} {
			if n, _ := histCount(t, ms, "varve.delivery.duration", map[attribute.Key]string{AttrSubscription: "hooks", AttrOutcome: outcome}); n != want {
				t.Errorf("varve.delivery.duration{outcome=%s} count %d, want %d", outcome, n, want)
			}
		}
	})
}

// streamOf returns the stream of a webhook payload.
func streamOf(body []byte) string {
	var p delivery.Payload
	if err := jsonUnmarshal(body, &p); err != nil {
		return ""
	}
	return p.Stream
}

// TestNATSDeliveryTrace: the NATS sink sends the traceparent of the
// delivery, in the trace of the event's append.
func TestNATSDeliveryTrace(t *testing.T) {
	t.Parallel()
	nc, err := natsgo.Connect(testenv.NATSURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("otelvarve_test_%d", time.Now().UnixNano())
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	defer js.DeleteStream(context.Background(), name)

	tel := newTelemetry(t)
	s, err := varve.New(teststore.Kinds[0].Backend(t), varve.Config{Tracer: NewTracer(tel.opts()...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // after the dispatcher stops
	cctx, cmd := tel.tp.Tracer("test").Start(ctx, "command")
	res, err := s.Append(cctx, "order-1", varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{}`)))
	cmd.End()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := natssink.New(js, natssink.Config{Subject: name + ".events"})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := run(t, s, "to-nats", WrapSink(ns, tel.opts()...), delivery.Config{})
	waitFor(t, d, res.Position)
	msg, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	sc := parseTraceparent(t, msg.Header.Get("traceparent"))
	if sc.TraceID() != cmd.SpanContext().TraceID() {
		t.Fatalf("traceparent %s is not in the append's trace %s", msg.Header.Get("traceparent"), cmd.SpanContext().TraceID())
	}
	spans := tel.ended(SpanDeliver)
	if len(spans) != 1 || spans[0].SpanContext().SpanID() != sc.SpanID() {
		t.Fatalf("the traceparent's span %s is not the one varve.deliver span (%d spans)", sc.SpanID(), len(spans))
	}
	if msg.Header.Get(jetstream.MsgIDHeader) != delivery.Key("to-nats", res.Position) {
		t.Fatalf("the sink's own headers are lost: %v", msg.Header)
	}
}

// TestDeliverSpanLinksWhenContextHasSpan: an attempt whose context already
// has a span (a replay in an operator's span, say) is that span's child and
// links to the append's span; without one it is the append span's child.
func TestDeliverSpanLinksWhenContextHasSpan(t *testing.T) {
	tel := newTelemetry(t)
	appendSC := testSpanContext(t, "")
	meta, _ := InjectMetadata(nil, appendSC)
	d := delivery.Delivery{Subscription: "s", Attempt: 1, Key: "s:1",
		Event: varve.RecordedEvent{Stream: "order-1", Version: 1, Position: varve.Position{Seq: 1}, Type: "T", Metadata: meta}}
	var headers []map[string]string
	sink := WrapSink(delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		headers = append(headers, delivery.HeadersFrom(ctx))
		return nil
	}), tel.opts()...)

	if err := sink.Deliver(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	octx, op := tel.tp.Tracer("test").Start(context.Background(), "replay")
	if err := sink.Deliver(octx, d); err != nil {
		t.Fatal(err)
	}
	op.End()

	spans := tel.ended(SpanDeliver)
	if len(spans) != 2 || len(headers) != 2 {
		t.Fatalf("%d deliver spans, %d header sets", len(spans), len(headers))
	}
	if p := spans[0].Parent(); p.SpanID() != appendSC.SpanID() || p.TraceID() != appendSC.TraceID() || len(spans[0].Links()) != 0 {
		t.Errorf("without a span in the context: parent %v, %d links; want the append span as parent", p, len(spans[0].Links()))
	}
	if p := spans[1].Parent(); p.SpanID() != op.SpanContext().SpanID() {
		t.Errorf("with a span in the context: parent %v, want the replay span", p)
	}
	if l := spans[1].Links(); len(l) != 1 || l[0].SpanContext.SpanID() != appendSC.SpanID() || l[0].SpanContext.TraceID() != appendSC.TraceID() {
		t.Errorf("with a span in the context: links %+v, want one to the append span", l)
	}
	for i, h := range headers {
		sc := parseTraceparent(t, h["traceparent"])
		if sc.SpanID() != spans[i].SpanContext().SpanID() {
			t.Errorf("attempt %d: traceparent %s names span %s, want the deliver span %s", i, h["traceparent"], sc.SpanID(), spans[i].SpanContext().SpanID())
		}
	}
	// An event without trace context still gets a delivery span, a root.
	d.Event.Metadata = nil
	if err := sink.Deliver(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if spans := tel.ended(SpanDeliver); len(spans) != 3 || spans[2].Parent().IsValid() {
		t.Errorf("an event without trace context: %d spans, parent %v", len(spans), spans[len(spans)-1].Parent())
	}
}

// TestCheckpointAge: while delivered events wait for the checkpoint's next
// save, varve.delivery.checkpoint.age grows from the last save; once the
// checkpoint is saved (here, when Run returns) it is 0.
func TestCheckpointAge(t *testing.T) {
	tel := newTelemetry(t)
	s := teststore.Kinds[0].Open(t, varve.Config{})
	sub, err := subscription.Open(context.Background(), s, subscription.Config{Name: "aging"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := delivery.New(sub, delivery.SinkFunc(func(context.Context, delivery.Delivery) error { return nil }),
		delivery.Config{CheckpointInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := ObserveDispatcher(sub, d, tel.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	who := map[attribute.Key]string{AttrSubscription: "aging"}
	if age, points := gauge(t, tel.collect(t), "varve.delivery.checkpoint.age", who); points != 1 || age != 0 {
		t.Fatalf("age before any delivery: %v in %d points, want 0", age, points)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	res, err := s.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("Placed", nil))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, d, res.Position)
	time.Sleep(20 * time.Millisecond) // so that the age is measurably above 0; nothing asserts a duration
	if age, _ := gauge(t, tel.collect(t), "varve.delivery.checkpoint.age", who); age <= 0 {
		t.Errorf("age with a delivered event not saved: %v, want above 0", age)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if age, _ := gauge(t, tel.collect(t), "varve.delivery.checkpoint.age", who); age != 0 {
		t.Errorf("age after the save: %v, want 0", age)
	}
}
