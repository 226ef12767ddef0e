package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/server"
)

// The server is an http.Handler: mount it in an application's server, here
// on a test server, and call its JSON API with the bearer token.
func Example() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if _, err := store.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("OrderPlaced", []byte(`{"sku":"A-1"}`))); err != nil {
		panic(err)
	}
	const token = "a-long-random-token-from-a-file"
	srv, err := server.New(server.Config{Store: store, Token: token, Name: "example"})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()

	req, _ := http.NewRequest("GET", hs.URL+"/api/v1/streams/order-1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode)

	anonymous, err := http.Get(hs.URL + "/api/v1/streams/order-1")
	if err != nil {
		panic(err)
	}
	_, _ = io.Copy(io.Discard, anonymous.Body)
	anonymous.Body.Close()
	fmt.Println(anonymous.StatusCode)
	// Output:
	// 200
	// 401
}
