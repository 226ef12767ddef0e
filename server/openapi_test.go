package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestOpenAPI holds the OpenAPI document the server serves to the routes
// it registers: every route is documented and every documented operation
// is a route; each one, called with a plain request, answers a status
// that its document lists; every $ref resolves.
func TestOpenAPI(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	ctx := t.Context()
	if _, err := store.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("Placed", []byte(`{"n":1}`))); err != nil {
		t.Fatal(err)
	}
	park(t, store, "hooks", "poison-1", 1)
	if err := store.Checkpoints().Save(ctx, "hooks", varve.Start); err != nil {
		t.Fatal(err)
	}
	a := serve(t, store, server.Config{Writes: true, Replay: func(string) delivery.Sink { return &recordingSink{} }})
	r := a.want(a.do("GET", "/api/v1/openapi.json", nil), 200, "the OpenAPI document")
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			OperationID string                     `json:"operationId"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		t.Fatalf("the document is no JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	routes := server.Routes(a.srv)
	slices.Sort(documented)
	registered := slices.Sorted(slices.Values(routes))
	if !slices.Equal(documented, registered) {
		t.Fatalf("documented operations and routes differ:\n documented %q\n registered %q", documented, registered)
	}
	ids := map[string]bool{}
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		op := doc.Paths[path][strings.ToLower(method)]
		if op.OperationID == "" || ids[op.OperationID] {
			t.Errorf("%s: operationId %q missing or repeated", route, op.OperationID)
		}
		ids[op.OperationID] = true
		target := strings.NewReplacer("{id}", "order-1", "{name}", "hooks").Replace(path)
		var body any
		if method == "POST" {
			body = map[string]any{}
		}
		status, raw := 0, []byte(nil)
		if strings.HasSuffix(path, "/tail") {
			// A live tail answers with its headers and runs on: its
			// status is all this needs.
			status = tailStatus(t, a, target)
		} else {
			res := a.do(method, target, body)
			status, raw = res.status, res.raw
		}
		if _, ok := op.Responses[fmt.Sprint(status)]; !ok {
			t.Errorf("%s %s answered %d, which its document does not list (%s)", method, target, status, raw)
		}
	}
	// Every reference resolves.
	var whole map[string]any
	if err := json.Unmarshal(r.raw, &whole); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var at any = whole
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := at.(map[string]any)
					at = m[part]
				}
				if at == nil {
					t.Errorf("$ref %s resolves to nothing", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(whole)
}

// tailStatus opens the live tail at target and returns its status.
func tailStatus(t *testing.T, a *api, target string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", a.url+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return res.StatusCode
}
