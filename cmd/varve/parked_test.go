package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/webhook"
)

// keepOpen lets every command "open" the same memory backend.
type keepOpen struct{ varve.Backend }

func (keepOpen) Close() error { return nil }

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := rootCmd(new(bool))
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestParkedCommands(t *testing.T) {
	ctx := context.Background()
	b := memory.New()
	old := openStore
	openStore = func(context.Context, string) (*varve.Store, error) { return varve.New(keepOpen{b}, varve.Config{}) }
	defer func() { openStore = old }()
	store, _ := varve.New(keepOpen{b}, varve.Config{})
	var parked []delivery.ParkedEvent
	for _, stream := range []string{"a", "a", "b"} {
		res, err := store.Append(ctx, stream, varve.Any, varve.Event{Type: "T", Data: []byte(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		parked = append(parked, delivery.ParkedEvent{Subscription: "hooks", Stream: stream, Version: res.LastVersion, Position: res.Position, Reason: delivery.ReasonRejected})
	}
	for e := range store.ReadAll(ctx, varve.Start) {
		for i := range parked {
			if parked[i].Position == e.Position {
				parked[i].EventID, parked[i].Type = e.ID, e.Type
			}
		}
	}
	if _, err := delivery.NewParked(store, "hooks").Park(ctx, parked...); err != nil {
		t.Fatal(err)
	}
	common := []string{"--store", "memory:", "--subscription", "hooks"}

	out, err := runCLI(t, append([]string{"parked", "list"}, common...)...)
	if err != nil || !strings.Contains(out, "3 parked") || !strings.Contains(out, "rejected") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if _, err := runCLI(t, append([]string{"parked", "skip"}, common...)...); err == nil {
		t.Fatal("skip without a selection must fail")
	}
	out, err = runCLI(t, append([]string{"parked", "skip", "--stream", "b"}, common...)...)
	if err != nil || !strings.Contains(out, "1 skipped") {
		t.Fatalf("skip: %v\n%s", err, out)
	}

	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if webhook.Verify([]byte("k"), r.Header, body, 0) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		keys = append(keys, r.Header.Get(delivery.HeaderIdempotencyKey))
		mu.Unlock()
	}))
	defer srv.Close()
	out, err = runCLI(t, append([]string{"parked", "replay", "--webhook", srv.URL, "--secret", "k"}, common...)...)
	if err != nil || !strings.Contains(out, "2 replayed, 0 failed") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	if want := []string{delivery.Key("hooks", parked[0].Position), delivery.Key("hooks", parked[1].Position)}; strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Fatalf("replayed keys %v, want %v", keys, want)
	}
	out, err = runCLI(t, append([]string{"parked", "list", "--json"}, common...)...)
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after replay: %v\n%s", err, out)
	}
}
