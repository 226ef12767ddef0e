package server_test

import (
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/retention"
	"github.com/varve-go/varve/server"
)

// TestRetentionAPI: policies set and removed over the API are the store's
// (package retention sees them), GET lists them with the scavenger's last
// pass, bad input and a missing policy get their 4xx, and a server without
// writes refuses the changes.
func TestRetentionAPI(t *testing.T) {
	store := teststore.Kinds[1].Open(t, varve.Config{}) // SQLite
	ctx := t.Context()
	a := serve(t, store, server.Config{Writes: true})
	r := a.want(a.do("GET", "/api/v1/retention", nil), 200, "the policies of a new store")
	if ps := r.body["policies"].([]any); len(ps) != 0 || r.body["last_report"] != nil || r.body["categories"] != true {
		t.Fatalf("a new store: %s", r.raw)
	}
	r = a.want(a.do("PUT", "/api/v1/retention", map[string]any{"category": "order", "max_age": "720h", "max_count": 100}), 200, "set a category's policy")
	if r.body["category"] != "order" || r.body["max_age"] != "720h0m0s" || r.body["max_count"] != 100.0 || r.body["updated_at"] == nil {
		t.Fatalf("set: %s", r.raw)
	}
	a.want(a.do("PUT", "/api/v1/retention", map[string]any{"stream": "order-7"}), 200, "exempt a stream")
	for _, bad := range []struct {
		body   any
		status int
		code   string
	}{
		{map[string]any{"max_count": 1}, 400, "invalid_argument"},
		{map[string]any{"stream": "a", "category": "b", "max_count": 1}, 400, "invalid_argument"},
		{map[string]any{"stream": "$parked-x", "max_count": 1}, 400, "invalid_argument"},
		{map[string]any{"category": "a-b", "max_count": 1}, 400, "invalid_argument"},
		{map[string]any{"stream": "a", "max_count": -1}, 400, "invalid_argument"},
		{map[string]any{"stream": "a", "max_age": "a month"}, 400, "invalid_argument"},
		{map[string]any{"stream": "a", "max_age": "-1h"}, 400, "invalid_argument"},
		{map[string]any{"stream": "a", "keep": 1}, 400, "invalid_argument"},
		{"[]", 400, "invalid_argument"},
	} {
		if r := a.do("PUT", "/api/v1/retention", bad.body); r.status != bad.status || r.errCode() != bad.code {
			t.Errorf("PUT %v: %d %s, want %d %s", bad.body, r.status, r.raw, bad.status, bad.code)
		}
	}
	rules, err := retention.List(ctx, store)
	if err != nil || len(rules) != 2 || rules[0].Target.Category != "order" || rules[1].Target.Stream != "order-7" || !rules[1].Policy.IsZero() {
		t.Fatalf("the store's policies: %+v, %v", rules, err)
	}

	// A pass of the scavenger shows in GET.
	for range 3 {
		if _, err := store.Append(ctx, "order-1", varve.Any, varve.NewEvent("E", nil)); err != nil {
			t.Fatal(err)
		}
	}
	a.want(a.do("PUT", "/api/v1/retention", map[string]any{"stream": "order-1", "max_count": 1}), 200, "set a stream's policy")
	sc, err := retention.New(retention.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ScavengeOnce(ctx); err != nil {
		t.Fatal(err)
	}
	r = a.want(a.do("GET", "/api/v1/retention", nil), 200, "the policies after a pass")
	last, _ := r.body["last_report"].(map[string]any)
	if len(r.body["policies"].([]any)) != 3 || last == nil || last["removed"] != 2.0 || last["position"] == "0" {
		t.Fatalf("after a pass: %s", r.raw)
	}

	a.want(a.do("DELETE", "/api/v1/retention?stream=order-7", nil), 200, "remove a stream's policy")
	for _, bad := range []struct {
		query  string
		status int
		code   string
	}{
		{"?stream=order-7", 404, "no_policy"},
		{"", 400, "invalid_argument"},
		{"?stream=a&category=b", 400, "invalid_argument"},
		{"?id=a", 400, "invalid_argument"},
	} {
		if r := a.do("DELETE", "/api/v1/retention"+bad.query, nil); r.status != bad.status || r.errCode() != bad.code {
			t.Errorf("DELETE %s: %d %s, want %d %s", bad.query, r.status, r.raw, bad.status, bad.code)
		}
	}
	r = a.want(a.do("DELETE", "/api/v1/retention?category=order", nil), 200, "remove a category's policy")
	if r.body["category"] != "order" || r.body["action"] != "removed" {
		t.Fatalf("remove: %s", r.raw)
	}

	ro := serve(t, store, server.Config{})
	ro.want(ro.do("GET", "/api/v1/retention", nil), 200, "read-only GET")
	for _, req := range []struct{ method, path string }{{"PUT", "/api/v1/retention"}, {"DELETE", "/api/v1/retention?stream=order-1"}} {
		if r := ro.do(req.method, req.path, map[string]any{"stream": "order-1", "max_count": 5}); r.status != 403 || r.errCode() != "writes_disabled" {
			t.Errorf("%s without writes: %d %s", req.method, r.status, r.raw)
		}
	}
	if rules, _ := retention.List(ctx, store); len(rules) != 1 || rules[0].Policy.MaxCount != 1 {
		t.Fatalf("a refused write changed the policies: %+v", rules)
	}
}
