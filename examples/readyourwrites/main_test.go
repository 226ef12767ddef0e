package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// TestReadYourWrites: on every backend, a read that carries the token of
// the append before it sees the append in the read model, every time.
func TestReadYourWrites(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		s, err := newService(store)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.runner.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
		}()
		srv := httptest.NewServer(s.routes())
		defer srv.Close()
		for i := 1; i <= 20; i++ {
			res, err := http.Post(srv.URL+"/orders/7", "application/json", strings.NewReader(`{"items": 1}`))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			token := res.Header.Get("Varve-Position")
			if res.StatusCode != http.StatusAccepted || token == "" {
				t.Fatalf("append %d: %s, token %q", i, res.Status, token)
			}
			got, err := http.Get(srv.URL + "/orders/7?after=" + token)
			if err != nil {
				t.Fatal(err)
			}
			var o order
			err = json.NewDecoder(got.Body).Decode(&o)
			got.Body.Close()
			if err != nil || got.StatusCode != http.StatusOK || o.Items != i {
				t.Fatalf("read %d after token %s: %s, %+v, %v; want %d items", i, token, got.Status, o, err, i)
			}
		}
		bad, err := http.Get(srv.URL + "/orders/7?after=not-a-position")
		if err != nil {
			t.Fatal(err)
		}
		bad.Body.Close()
		if bad.StatusCode != http.StatusBadRequest {
			t.Fatalf("a bad token: %s", bad.Status)
		}
	})
}
