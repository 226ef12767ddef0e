package server_test

import (
	"encoding/json"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
	"github.com/varve-go/varve/shred"
)

// TestErasures: the erasure routes list the reports and erase, with
// writes and the master key; bad subjects, a subject without a key, a
// server without writes or without the master key get their errors.
func TestErasures(t *testing.T) {
	ctx := t.Context()
	store, sh := teststore.Kinds[0].OpenShredded(t, varve.Config{})
	for _, subject := range []string{"user-1", "user-1", "user-2"} {
		ev, err := sh.Seal(ctx, subject, varve.NewEvent("Registered", []byte(`{"email":"a@example.com"}`)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Append(ctx, subject, varve.Any, ev); err != nil {
			t.Fatal(err)
		}
	}
	a := serve(t, store, server.Config{Writes: true})
	var list struct {
		Erasures []shred.Report `json:"erasures"`
		Erase    bool           `json:"erase"`
	}
	decode := func(r response, v any) {
		t.Helper()
		if err := json.Unmarshal(r.raw, v); err != nil {
			t.Fatalf("%s: %v", r.raw, err)
		}
	}
	decode(a.want(a.do("GET", "/api/v1/erasures", nil), 200, "no erasures"), &list)
	if len(list.Erasures) != 0 || !list.Erase {
		t.Fatalf("no erasures: %+v", list)
	}
	errs := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"an empty subject", "POST", "/api/v1/erasures", map[string]any{"subject": ""}, 400, "invalid_argument"},
		{"an unknown field", "POST", "/api/v1/erasures", map[string]any{"subject": "user-1", "counts": true}, 400, "invalid_argument"},
		{"a subject without a key", "POST", "/api/v1/erasures", map[string]any{"subject": "user-9"}, 404, "nothing_to_erase"},
		{"a bad limit", "GET", "/api/v1/erasures?limit=0", nil, 400, "invalid_argument"},
		{"an unknown parameter", "GET", "/api/v1/erasures?subjects=x", nil, 400, "invalid_argument"},
	}
	for _, e := range errs {
		if r := a.want(a.do(e.method, e.path, e.body), e.status, e.name); r.errCode() != e.code {
			t.Fatalf("%s: code %q, want %q", e.name, r.errCode(), e.code)
		}
	}
	var rep shred.Report
	decode(a.want(a.do("POST", "/api/v1/erasures", map[string]any{"subject": "user-1", "count": true}), 200, "erase user-1"), &rep)
	if rep.Subject != "user-1" || !rep.Counted || rep.Events != 2 {
		t.Fatalf("report: %+v", rep)
	}
	if r := a.want(a.do("POST", "/api/v1/erasures", map[string]any{"subject": "user-1"}), 404, "erase user-1 again"); r.errCode() != "nothing_to_erase" {
		t.Fatalf("again: %s", r.raw)
	}
	a.want(a.do("POST", "/api/v1/erasures", map[string]any{"subject": "user-2"}), 200, "erase user-2")
	decode(a.want(a.do("GET", "/api/v1/erasures?subject=user-1&limit=5", nil), 200, "user-1's erasures"), &list)
	if len(list.Erasures) != 1 || list.Erasures[0].Key != rep.Key || list.Erasures[0].Events != 2 {
		t.Fatalf("user-1's erasures: %+v", list)
	}
	decode(a.want(a.do("GET", "/api/v1/erasures", nil), 200, "erasures"), &list)
	if len(list.Erasures) != 2 || list.Erasures[0].Subject != "user-2" {
		t.Fatalf("erasures: %+v", list)
	}
	for ev, err := range store.ReadStream(ctx, "user-1") {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := shred.Erased(ev.Data); !ok {
			t.Fatalf("user-1 reads %s after the erasure", ev.Data)
		}
	}

	// Without writes: 403; without the master key: 501, and no erase.
	ro := serve(t, store, server.Config{})
	ro.want(ro.do("POST", "/api/v1/erasures", map[string]any{"subject": "user-1"}), 403, "erase without writes")
	plain := teststore.Kinds[0].Open(t, varve.Config{})
	nokey := serve(t, plain, server.Config{Writes: true})
	if r := nokey.want(nokey.do("POST", "/api/v1/erasures", map[string]any{"subject": "user-1"}), 501, "erase without the master key"); r.errCode() != "not_supported" {
		t.Fatalf("without the master key: %s", r.raw)
	}
	decode(nokey.want(nokey.do("GET", "/api/v1/erasures", nil), 200, "erasures without the master key"), &list)
	if list.Erase {
		t.Fatal("a server without the master key says it can erase")
	}
}
