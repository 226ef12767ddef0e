package otelvarve_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/otelvarve"
)

// TestPrometheusScrape wires the OpenTelemetry Prometheus exporter as
// docs/observability.md shows and scrapes it over loopback HTTP: the
// store's metrics come out under their Prometheus names.
func TestPrometheusScrape(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(ctx)
	store, err := varve.New(memory.New(), varve.Config{Tracer: otelvarve.NewTracer(otelvarve.WithMeterProvider(mp))})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{}`))); err == nil {
		t.Fatal("the second append did not conflict")
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	for _, want := range []string{
		`varve_append_duration_seconds_count{otel_scope_name="` + otelvarve.ScopeName + `"`,
		`varve_outcome="conflict"`,
		`varve_events_appended_total{`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the scrape has no %s", want)
		}
	}
}
