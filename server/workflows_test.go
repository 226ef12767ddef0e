package server_test

import (
	"context"
	"errors"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
	"github.com/varve-go/varve/workflow"
)

type dropSender struct{}

func (dropSender) Send(context.Context, workflow.Command) error { return nil }

// TestWorkflowsAPI: an instance whose input failed is listed and shown
// with its last error; a retry request is recorded, a cancel ends it, and
// refusals get their status; a server without writes refuses both.
func TestWorkflowsAPI(t *testing.T) {
	store := teststore.Kinds[1].Open(t, varve.Config{}) // SQLite
	ctx := t.Context()
	def := workflow.Definition[string]{
		Name:   "shipping",
		Route:  func(e *varve.RecordedEvent) (string, bool) { return "o1", e.Type == "Placed" },
		Evolve: func(_ string, e *varve.RecordedEvent) string { return e.Type },
		Decide: func(string, workflow.Input) (workflow.Decision, error) {
			return workflow.Decision{}, errors.New("carrier down")
		},
	}
	r, err := workflow.NewRunner(store, def, dropSender{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, "orders-1", varve.Any, varve.NewEvent("Placed", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	for e, err := range store.ReadStream(ctx, "orders-1") {
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Handle(ctx, e); err == nil {
			t.Fatal("Decide failed, Handle did not")
		}
	}

	ro := serve(t, store, server.Config{})
	if res := ro.do("POST", "/api/v1/workflows/shipping/instances/o1/cancel", map[string]any{}); res.status != 403 {
		t.Fatalf("cancel without writes: %d %s", res.status, res.raw)
	}

	a := serve(t, store, server.Config{Writes: true})
	res := a.want(a.do("GET", "/api/v1/workflows/shipping", nil), 200, "the instances")
	list, _ := res.body["instances"].([]any)
	if len(list) != 1 {
		t.Fatalf("list: %s", res.raw)
	}
	first := list[0].(map[string]any)
	last, _ := first["last_error"].(map[string]any)
	if first["stream"] != "shipping-o1" || last == nil || last["type"] != "Placed" {
		t.Fatalf("list: %s", res.raw)
	}
	a.want(a.do("GET", "/api/v1/workflows/shipping/instances/o1", nil), 200, "the instance")
	if res := a.do("GET", "/api/v1/workflows/shipping/instances/none", nil); res.status != 404 {
		t.Fatalf("a missing instance: %d %s", res.status, res.raw)
	}
	if res := a.do("GET", "/api/v1/workflows/shipping?limit=0", nil); res.status != 400 {
		t.Fatalf("limit 0: %d %s", res.status, res.raw)
	}
	res = a.want(a.do("POST", "/api/v1/workflows/shipping/instances/o1/retry", map[string]any{}), 200, "retry")
	if rt, _ := res.body["retried"].(map[string]any); rt["error"] == nil {
		t.Fatalf("retry: %s", res.raw)
	}
	res = a.want(a.do("POST", "/api/v1/workflows/shipping/instances/o1/cancel", map[string]any{"reason": "by hand"}), 200, "cancel")
	if res.body["cancelled"] != true || res.body["reason"] != "by hand" {
		t.Fatalf("cancel: %s", res.raw)
	}
	for _, op := range []string{"cancel", "retry"} {
		if res := a.do("POST", "/api/v1/workflows/shipping/instances/o1/"+op, map[string]any{}); res.status != 409 || res.errCode() != "cancelled" {
			t.Fatalf("%s of a cancelled instance: %d %s", op, res.status, res.raw)
		}
	}
	st, err := workflow.Inspect(ctx, store, "shipping-o1")
	if err != nil || !st.Cancelled {
		t.Fatalf("the store's instance: %+v, %v", st, err)
	}
}
