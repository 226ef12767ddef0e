package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/open"
)

func TestSplitReplay(t *testing.T) {
	for _, c := range []struct {
		spec, name, hook string
		ok               bool
	}{
		{"hooks=http://h/x", "hooks", "http://h/x", true},
		{"a=b=https://h/x?y=z", "a=b", "https://h/x?y=z", true},
		{"a=https://h/?next=http://x", "a", "https://h/?next=http://x", true},
		{"a=b=https://h/?next=https://x&c=d", "a=b", "https://h/?next=https://x&c=d", true},
		{"k=v=w=http://h/?q==", "k=v=w", "http://h/?q==", true},
		{"A=HTTPS://H/", "A", "HTTPS://H/", true},
		{"name==http://h", "name=", "http://h", true},
		{"=http://h", "", "http://h", true},
		{"nohook", "", "", false},
		{"a=b", "", "", false},
		{"a=ftp://h", "", "", false},
		{"a=httpx://h", "", "", false},
		{"a=http:/h", "", "", false},
		{"a=", "", "", false},
		{"http://h", "", "", false},
	} {
		name, hook, ok := splitReplay(c.spec)
		if name != c.name || hook != c.hook || ok != c.ok {
			t.Errorf("splitReplay(%q) = %q, %q, %v; want %q, %q, %v", c.spec, name, hook, ok, c.name, c.hook, c.ok)
		}
	}
}

func TestReplaySinks(t *testing.T) {
	t.Setenv("VARVE_WEBHOOK_SECRET", "k")
	for _, c := range []struct {
		name  string
		specs []string
		want  []string // the names; nil: a usage error
	}{
		{"names with =", []string{"a=b=http://127.0.0.1:1/x?y=z", "c=https://h/?next=https://i/"}, []string{"a=b", "c"}},
		{"no URL", []string{"nohook"}, nil},
		{"no name", []string{"=http://h/"}, nil},
		{"another scheme", []string{"a=ftp://h/"}, nil},
		{"no host", []string{"a=http://"}, nil},
		{"a NUL in the name", []string{"a\x00=http://h/"}, nil},
		{"twice", []string{"a=b=http://h/", "a=b=http://g/"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sinks, err := replaySinks(c.specs)
			for _, s := range sinks {
				s.Close()
			}
			if c.want == nil {
				var ee *exitError
				if !errors.Is(err, varve.ErrInvalidArgument) || !errors.As(err, &ee) || ee.code != exitUsage {
					t.Fatalf("replaySinks(%q): %v, want a usage error that is varve.ErrInvalidArgument", c.specs, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for n := range sinks {
				names = append(names, n)
			}
			slices.Sort(names)
			if !slices.Equal(names, c.want) {
				t.Fatalf("names %q, want %q", names, c.want)
			}
		})
	}
}

// TestServeReplayWebhookName: varve serve replays the parked events of a
// subscription whose name holds "=" to a webhook whose URL's query holds
// "=" and a URL, through the API.
func TestServeReplayWebhookName(t *testing.T) {
	const sub = "orders=eu"
	ctx := context.Background()
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "replay.db"))
	s, err := open.Store(ctx, url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("Placed", []byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	var id [16]byte
	for e, err := range s.ReadStream(ctx, "order-1") {
		if err != nil {
			t.Fatal(err)
		}
		id = e.ID
	}
	if _, err := delivery.NewParked(s, sub).Park(ctx, delivery.ParkedEvent{Subscription: sub, Stream: "order-1", Version: 1,
		Position: res.Position, EventID: id, Type: "Placed", Reason: delivery.ReasonRejected, ParkedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	got := make(chan string, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.URL.RequestURI():
		default:
		}
	}))
	defer hook.Close()
	const query = "/in?tenant=eu&next=https://example.invalid/x?a=b"
	const tok = "replay-test-token-abcdef0123"
	t.Setenv(tokenEnv, tok)
	t.Setenv("VARVE_WEBHOOK_SECRET", "k")
	addr := make(chan string, 1)
	listening = func(a string) { addr <- a }
	defer func() { listening = func(string) {} }()
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var out, errOut syncBuf
	done := make(chan int, 1)
	go func() {
		done <- execute(sctx, []string{"serve", "--store", url, "--listen", "127.0.0.1:0", "--writes",
			"--replay-webhook", sub + "=" + hook.URL + query}, &out, &errOut)
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case code := <-done:
		t.Fatalf("serve exited %d:\n%s", code, errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	req, _ := http.NewRequest("POST", base+"/api/v1/subscriptions/"+strings.ReplaceAll(sub, "=", "%3D")+"/parked/replay", strings.NewReader(`{"all":true}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("replay: %d %s", resp.StatusCode, body)
	}
	select {
	case uri := <-got:
		if uri != query {
			t.Fatalf("the webhook was called at %q, want %q", uri, query)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the webhook was not called; the replay said %s", body)
	}
	cancel(errInterrupted)
	select {
	case code := <-done:
		if code != exitInterrupted {
			t.Fatalf("serve exited %d:\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}
