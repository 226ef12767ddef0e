package webhook_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/webhook"
)

// BenchmarkDeliver compares the webhook sink with a bare client loop that
// posts the same body to the same loopback endpoint: the difference per op
// (time, bytes, allocations) is what the sink adds to a request.
func BenchmarkDeliver(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	d := testDelivery()
	ctx := context.Background()
	b.Run("webhook", func(b *testing.B) {
		w, err := webhook.New(webhook.Config{URL: srv.URL, Secret: secret, MaxConcurrency: 4})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		b.ReportAllocs()
		for b.Loop() {
			if err := w.Deliver(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		body := delivery.AppendPayload(nil, d)
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxConnsPerHost, t.MaxIdleConnsPerHost = 4, 4
		defer t.CloseIdleConnections()
		client := &http.Client{Transport: t}
		b.ReportAllocs()
		for b.Loop() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
