package otelvarve

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/varve-go/varve"
)

// telemetry is an SDK tracer and meter provider whose spans and metrics a
// test reads from memory.
type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(t testing.TB) *telemetry {
	x := &telemetry{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	x.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(x.spans), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	x.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(x.reader))
	t.Cleanup(func() {
		_ = x.tp.Shutdown(context.Background())
		_ = x.mp.Shutdown(context.Background())
	})
	return x
}

func (x *telemetry) opts() []Option {
	return []Option{WithTracerProvider(x.tp), WithMeterProvider(x.mp)}
}

// ended returns the ended spans called name.
func (x *telemetry) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range x.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// attrs returns the attributes of a span as a map of their emitted values.
func attrs(kvs []attribute.KeyValue) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.String()
	}
	return m
}

// collect reads the metrics of the meter provider.
func (x *telemetry) collect(t testing.TB) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := x.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// matches reports whether set holds every attribute of want.
func matches(set attribute.Set, want map[attribute.Key]string) bool {
	for k, v := range want {
		got, ok := set.Value(k)
		if !ok || got.String() != v {
			return false
		}
	}
	return true
}

// histCount returns the count of the data points of histogram name whose
// attributes match want, and how many points matched.
func histCount(t testing.TB, ms map[string]metricdata.Aggregation, name string, want map[attribute.Key]string) (count uint64, points int) {
	t.Helper()
	h, ok := ms[name].(metricdata.Histogram[float64])
	if !ok {
		if hi, ok := ms[name].(metricdata.Histogram[int64]); ok {
			for _, p := range hi.DataPoints {
				if matches(p.Attributes, want) {
					count += p.Count
					points++
				}
			}
			return count, points
		}
		t.Fatalf("no histogram %s among %d metrics", name, len(ms))
	}
	for _, p := range h.DataPoints {
		if matches(p.Attributes, want) {
			count += p.Count
			points++
		}
	}
	return count, points
}

// sum returns the sum of the points of counter or gauge name whose
// attributes match want.
func sum(t testing.TB, ms map[string]metricdata.Aggregation, name string, want map[attribute.Key]string) int64 {
	t.Helper()
	var total int64
	switch d := ms[name].(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				total += p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				total += p.Value
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				total += int64(p.Value)
			}
		}
	default:
		t.Fatalf("no counter or gauge %s (found %T)", name, ms[name])
	}
	return total
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// gauge returns the value of the float gauge name whose attributes match
// want, and how many points matched.
func gauge(t testing.TB, ms map[string]metricdata.Aggregation, name string, want map[attribute.Key]string) (v float64, points int) {
	t.Helper()
	g, ok := ms[name].(metricdata.Gauge[float64])
	if !ok {
		t.Fatalf("no float gauge %s (found %T)", name, ms[name])
	}
	for _, p := range g.DataPoints {
		if matches(p.Attributes, want) {
			v = p.Value
			points++
		}
	}
	return v, points
}

// readable waits until $all can return the event at pos: a backend may
// make a commit readable there a moment after the append returns, and
// other clients of a shared server may hold it back a while longer.
func readable(t testing.TB, s *varve.Store, pos varve.Position) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a bound on a hang
	for {
		p, err := s.LastPosition(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !p.Less(pos) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("$all stays at %s, before a committed append at %s", p, pos)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
