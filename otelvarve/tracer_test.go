package otelvarve

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/schema"
)

// TestSpansAndMetrics: an append of two events, a conflicting append, a
// stream read and a $all read give the spans and metrics that
// docs/observability.md lists, by name and attributes, on every backend.
func TestSpansAndMetrics(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		tel := newTelemetry(t)
		b := k.Backend(t)
		name := b.Features().Name
		s, err := varve.New(b, varve.Config{Tracer: NewTracer(tel.opts()...)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()

		res, err := s.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("A", []byte(`{}`)), varve.NewEvent("B", []byte(`{}`)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("C", []byte(`{}`)))
		if !errors.Is(err, varve.ErrWrongExpectedVersion) {
			t.Fatalf("second append: %v, want a conflict", err)
		}
		n := 0
		for _, err := range s.ReadStream(ctx, "order-1") {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		page, err := s.ReadAllPage(ctx, varve.Start, nil, varve.Limit(10))
		if err != nil || n != 2 || len(page.Events) != 2 {
			t.Fatalf("read %d events of the stream and %d of $all: %v", n, len(page.Events), err)
		}
		if _, err := s.ReadAllPage(ctx, page.Through, nil); err != nil {
			t.Fatal(err)
		}

		// Spans.
		appends := tel.ended(SpanAppend)
		if len(appends) != 2 {
			t.Fatalf("%d append spans, want 2", len(appends))
		}
		for i, want := range []map[attribute.Key]string{
			{AttrBackend: name, AttrStream: "order-1", AttrExpectedVersion: "no-stream", AttrOutcome: "ok", AttrBatchSize: "2",
				AttrVersion: "2", AttrPosition: res.Position.String()},
			{AttrBackend: name, AttrStream: "order-1", AttrExpectedVersion: "no-stream", AttrOutcome: "conflict", AttrBatchSize: "1"},
		} {
			sp := appends[i]
			got := attrs(sp.Attributes())
			for key, v := range want {
				if got[key] != v {
					t.Errorf("append span %d: %s = %q, want %q", i, key, got[key], v)
				}
			}
			if sp.SpanKind() != trace.SpanKindClient {
				t.Errorf("append span %d kind %v", i, sp.SpanKind())
			}
		}
		if st := appends[1].Status(); st.Code != codes.Error || len(appends[1].Events()) == 0 {
			t.Errorf("the conflicting append's span: status %+v, %d events; want an error and its record", st, len(appends[1].Events()))
		}
		if st := appends[0].Status(); st.Code == codes.Error {
			t.Errorf("the committed append's span has status %+v", st)
		}
		reads := tel.ended(SpanReadStream)
		if len(reads) != 1 {
			t.Fatalf("%d read_stream spans, want 1 (one short page)", len(reads))
		}
		if got := attrs(reads[0].Attributes()); got[AttrBackend] != name || got[AttrStream] != "order-1" ||
			got[AttrDirection] != "forward" || got[AttrOutcome] != "ok" || got[AttrBatchSize] != "2" {
			t.Errorf("read_stream span attributes %v", got)
		}
		alls := tel.ended(SpanReadAll)
		if len(alls) != 2 {
			t.Fatalf("%d read_all spans, want 2", len(alls))
		}
		if got := attrs(alls[0].Attributes()); got[AttrBatchSize] != "2" || got[AttrPosition] != "0" || got[AttrOutcome] != "ok" {
			t.Errorf("first read_all span attributes %v", got)
		}
		if got := attrs(alls[1].Attributes()); got[AttrBatchSize] != "0" || got[AttrPosition] != page.Through.String() {
			t.Errorf("second read_all span attributes %v", got)
		}

		// Metrics.
		ms := tel.collect(t)
		for _, tc := range []struct {
			metric string
			attrs  map[attribute.Key]string
			count  uint64
		}{
			{"varve.append.duration", map[attribute.Key]string{AttrBackend: name, AttrOutcome: "ok", AttrBatchSize: "2-10"}, 1},
			{"varve.append.duration", map[attribute.Key]string{AttrBackend: name, AttrOutcome: "conflict", AttrBatchSize: "1"}, 1},
			{"varve.append.duration", map[attribute.Key]string{AttrBackend: name, AttrOutcome: "error"}, 0},
			{"varve.read_stream.duration", map[attribute.Key]string{AttrBackend: name, AttrOutcome: "ok", AttrBatchSize: "2-10"}, 1},
			{"varve.read_all.duration", map[attribute.Key]string{AttrBackend: name, AttrOutcome: "ok", AttrBatchSize: "2-10"}, 1},
			{"varve.read_all.duration", map[attribute.Key]string{AttrBackend: name, AttrOutcome: "ok", AttrBatchSize: "0"}, 1},
		} {
			if got, _ := histCount(t, ms, tc.metric, tc.attrs); got != tc.count {
				t.Errorf("%s%v: count %d, want %d", tc.metric, tc.attrs, got, tc.count)
			}
		}
		h := ms["varve.append.duration"].(metricdata.Histogram[float64])
		for _, p := range h.DataPoints {
			if p.Count > 0 && p.Sum <= 0 {
				t.Errorf("append duration sum %v for %d appends", p.Sum, p.Count)
			}
		}
		for _, tc := range []struct {
			metric string
			attrs  map[attribute.Key]string
			want   int64
		}{
			{"varve.events.appended", map[attribute.Key]string{AttrBackend: name}, 2},
			{"varve.events.read", map[attribute.Key]string{AttrBackend: name, AttrRead: "stream"}, 2},
			{"varve.events.read", map[attribute.Key]string{AttrBackend: name, AttrRead: "all"}, 2},
		} {
			if got := sum(t, ms, tc.metric, tc.attrs); got != tc.want {
				t.Errorf("%s%v = %d, want %d", tc.metric, tc.attrs, got, tc.want)
			}
		}
	})
}

func TestErrorOutcome(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	s, err := varve.New(teststore.Kinds[0].Backend(t), varve.Config{Tracer: NewTracer(tel.opts()...)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, err := range s.ReadStream(ctx, "missing") {
		if !errors.Is(err, varve.ErrStreamNotFound) {
			t.Fatalf("read of a missing stream: %v", err)
		}
	}
	sp := tel.ended(SpanReadStream)
	if len(sp) != 1 || attrs(sp[0].Attributes())[AttrOutcome] != "error" || sp[0].Status().Code != codes.Error {
		t.Fatalf("read of a missing stream: %d spans", len(sp))
	}
	if n, _ := histCount(t, tel.collect(t), "varve.read_stream.duration", map[attribute.Key]string{AttrOutcome: "error", AttrBatchSize: "0"}); n != 1 {
		t.Fatalf("read_stream duration with outcome error: count %d", n)
	}
	for n, want := range map[int]string{0: "0", 1: "1", 2: "2-10", 10: "2-10", 11: "11-100", 1000: "101-1000", 1001: "1001+"} {
		if got := BatchSizeRange(n); got != want {
			t.Errorf("BatchSizeRange(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestConsumerLag: the lag of a consumer at the start of the log is the
// events in it and the age of the first; at the head it is 0.
func TestConsumerLag(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		tel := newTelemetry(t)
		s := k.Open(t, varve.Config{Tracer: NewTracer(tel.opts()...)})
		var last varve.Position
		for i := range 5 {
			res, err := s.Append(ctx, "lag-"+strconv.Itoa(i), varve.NoStream, varve.NewEvent("T", nil))
			if err != nil {
				t.Fatal(err)
			}
			last = res.Position
		}
		readable(t, s, last)
		spans := len(tel.spans.Ended())
		var cp varve.Position // the consumer's checkpoint; read by the collect below, on this goroutine
		reg, err := ObserveConsumer("projector", s, func() varve.Position { return cp }, tel.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Unregister()
		who := map[attribute.Key]string{AttrSubscription: "projector"}
		ms := tel.collect(t)
		if lag := sum(t, ms, "varve.consumer.lag", who); lag != 5 {
			t.Errorf("lag at the start: %d events, want 5", lag)
		}
		if age, points := gauge(t, ms, "varve.consumer.lag.time", who); points != 1 || age <= 0 {
			t.Errorf("lag time at the start: %v s in %d points, want above 0", age, points)
		}
		limited, err := ObserveConsumer("limited", s, func() varve.Position { return varve.Start }, append(tel.opts(), WithLagLimit(3))...)
		if err != nil {
			t.Fatal(err)
		}
		defer limited.Unregister()
		if lag := sum(t, tel.collect(t), "varve.consumer.lag", map[attribute.Key]string{AttrSubscription: "limited"}); lag != 3 {
			t.Errorf("lag with a limit of 3: %d", lag)
		}
		cp = last
		ms = tel.collect(t)
		if lag := sum(t, ms, "varve.consumer.lag", who); lag != 0 {
			t.Errorf("lag at the head: %d events, want 0", lag)
		}
		if age, points := gauge(t, ms, "varve.consumer.lag.time", who); points != 1 || age != 0 {
			t.Errorf("lag time at the head: %v s in %d points, want 0", age, points)
		}
		if n := len(tel.spans.Ended()); n != spans {
			t.Errorf("counting the lag made %d spans: it reads past the store's tracer", n-spans)
		}
	})
}

// TestConsumerLagBigEvents: the lag count reads pages of at most
// subscription.LagPageBytes of event data, and a page that its byte budget
// cut short does not end the count.
func TestConsumerLagBigEvents(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		tel := newTelemetry(t)
		s := k.Open(t, varve.Config{})
		var last varve.Position
		for i, n := range []int{48 << 10, 48 << 10, 10, 100 << 10, 48 << 10, 5} {
			res, err := s.Append(t.Context(), "big-"+strconv.Itoa(i), varve.NoStream, varve.NewEvent("T", make([]byte, n)))
			if err != nil {
				t.Fatal(err)
			}
			last = res.Position
		}
		readable(t, s, last)
		reg, err := ObserveConsumer("big", s, func() varve.Position { return varve.Start }, tel.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Unregister()
		if lag := sum(t, tel.collect(t), "varve.consumer.lag", map[attribute.Key]string{AttrSubscription: "big"}); lag != 6 {
			t.Errorf("lag over big events: %d, want 6", lag)
		}
	})
}

type counter struct{ N int }

type incremented struct{}

// TestRepositoryMetrics: a conflict inside Execute shows as a conflict and a
// retry of the repository.
func TestRepositoryMetrics(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	s := teststore.Kinds[0].Open(t, varve.Config{})
	events := schema.NewRegistry()
	schema.Register[incremented](events, "Incremented")
	repo, err := aggregate.New(s, aggregate.Definition[counter]{
		Category: "counter", Events: events,
		Apply: func(c counter, _ any) counter { c.N++; return c },
	}, aggregate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := ObserveRepository("counters", repo, tel.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	first := true
	if _, err := repo.Execute(ctx, "c1", func(a *aggregate.Aggregate[counter]) error {
		if first { // another writer gets in between the load and the save
			first = false
			if _, err := s.Append(ctx, repo.Stream("c1"), varve.Any, varve.NewEvent("Incremented", []byte(`{}`))); err != nil {
				return err
			}
		}
		return a.Raise(incremented{})
	}); err != nil {
		t.Fatal(err)
	}
	ms := tel.collect(t)
	who := map[attribute.Key]string{AttrRepository: "counters"}
	for name, want := range map[string]int64{"varve.aggregate.conflicts": 1, "varve.aggregate.retries": 1, "varve.aggregate.saves": 1} {
		if got := sum(t, ms, name, who); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// TestOneTracerManyStores: a tracer shared by stores over different
// backends measures each under its own backend's name.
func TestOneTracerManyStores(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	cfg := varve.Config{Tracer: NewTracer(tel.opts()...)}
	for _, k := range teststore.Kinds[:2] { // memory, sqlite
		s := k.Open(t, cfg)
		if _, err := s.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("A", nil)); err != nil {
			t.Fatal(err)
		}
	}
	ms := tel.collect(t)
	for _, name := range []string{"memory", "sqlite"} {
		if got := sum(t, ms, "varve.events.appended", map[attribute.Key]string{AttrBackend: name}); got != 1 {
			t.Errorf("varve.events.appended of %s: %d, want 1", name, got)
		}
	}
	if spans := tel.ended(SpanAppend); len(spans) != 2 || attrs(spans[0].Attributes())[AttrBackend] != "memory" ||
		attrs(spans[1].Attributes())[AttrBackend] != "sqlite" {
		t.Errorf("%d append spans, want one of each backend", len(spans))
	}
}
