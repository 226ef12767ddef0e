package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/internal/deliverytest"
	"github.com/varve-go/varve/delivery/webhook"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/subscription"
)

// Secrets of the endpoint URL: a basic-auth password and a token parameter.
const (
	passwordSecret = "pw5ecretPW"
	tokenSecret    = "tok5ecretTOK"
)

// syncBuffer is a log destination for many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNoSecretInOutput: an endpoint URL with a password and a token fails
// in every way (5xx, 4xx, connection refused, timeout) behind a real
// dispatcher that parks on a real store; neither secret appears in an
// error, a log line, StatusError.URL or a stored parked record, while the
// endpoint's host does (the errors still say where they went).
func TestNoSecretInOutput(t *testing.T) {
	t.Parallel()
	// The endpoint echoes the request URI, as many 404 pages do.
	echo := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			fmt.Fprintf(w, "cannot POST %s", r.URL.RequestURI())
		}
	}
	for _, k := range teststore.Kinds {
		if k.Name != "memory" && k.Name != "sqlite" {
			continue
		}
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name    string
				handler http.HandlerFunc // nil: nothing listens
				status  int              // of the StatusError, if any
			}{
				{"5xx", echo(http.StatusBadGateway), http.StatusBadGateway},
				{"4xx", echo(http.StatusNotFound), http.StatusNotFound},
				{"connection refused", nil, 0},
				{"timeout", func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client leave
					<-r.Context().Done()
					// Should the server see the request end before the
					// client's timeout (HTTP/2 under load), the answer is
					// still a failure, never a delivery.
					w.WriteHeader(http.StatusGatewayTimeout)
					fmt.Fprintf(w, "cannot POST %s", r.URL.RequestURI())
				}, 0},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					testNoSecret(t, k, tc.handler, tc.status)
				})
			}
		})
	}
}

func testNoSecret(t *testing.T, k teststore.Kind, handler http.HandlerFunc, status int) {
	var (
		host   string
		client *http.Client
	)
	if handler != nil {
		srv := httptest.NewTLSServer(handler)
		t.Cleanup(srv.Close)
		host, client = srv.Listener.Addr().String(), srv.Client()
	} else {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		host = l.Addr().String()
		l.Close()
	}
	raw := "https://hook-user:" + passwordSecret + "@" + host + "/path?tenant=acme&token=" + tokenSecret
	var outputs []string // every text that leaves the sink or the dispatcher
	leaks := func(what, text string) {
		t.Helper()
		for _, secret := range []string{passwordSecret, tokenSecret} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds the secret %s: %s", what, secret, text)
			}
		}
	}

	// Only the timeout case waits for the timeout; the others get an
	// answer, however busy the machine.
	timeout := time.Minute
	if handler != nil && status == 0 {
		timeout = 100 * time.Millisecond
	}
	hook, err := webhook.New(webhook.Config{URL: raw, Secret: secret, Timeout: timeout, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	defer hook.Close()
	leaks("the sink's String", fmt.Sprint(hook))
	var mu sync.Mutex
	sink := delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		err := hook.Deliver(ctx, d)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			t.Error("the delivery succeeded")
			return nil
		}
		outputs = append(outputs, err.Error())
		var se *webhook.StatusError
		if errors.As(err, &se) {
			leaks("StatusError.URL", se.URL)
			leaks("StatusError.Body", se.Body)
			// A timeout is a transport error; only a server that saw the
			// request end first may answer, and then with 504.
			want := se.StatusCode == status || status == 0 && handler != nil && se.StatusCode == http.StatusGatewayTimeout
			if !want || !strings.Contains(se.URL, host) || !strings.Contains(se.Body, "cannot POST /path") {
				t.Errorf("StatusError %+v, want status %d, a URL with host %s and the body", se, status, host)
			}
		} else if status != 0 {
			t.Errorf("error %v, want a StatusError", err)
		}
		return err
	})

	store := k.Open(t, varve.Config{})
	res, err := store.Append(context.Background(), "order-1", varve.NoStream, varve.Event{Type: "OrderPaid", Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	r := deliverytest.Start(t, store, "hooks", sink, delivery.Config{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Retry:  subscription.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond},
	})
	r.Wait(t, res.Position)
	r.Stop(t)

	parked, err := r.D.Parked().List(context.Background())
	if err != nil || len(parked) != 1 || parked[0].Error == "" {
		t.Fatalf("parked %+v, %v; want one record with the error", parked, err)
	}
	list, _ := json.Marshal(parked)
	leaks("the parked list", string(list))
	if !strings.Contains(parked[0].Error, host) {
		t.Errorf("parked error %q does not say which endpoint failed", parked[0].Error)
	}
	for e, err := range store.ReadStream(context.Background(), r.D.Parked().Stream()) {
		if err != nil {
			t.Fatal(err)
		}
		leaks("a stored parked record", string(e.Data)+string(e.Metadata))
	}
	rr, err := r.D.Parked().Replay(context.Background(), sink, nil)
	if err != nil || len(rr.Failed) != 1 {
		t.Fatalf("replay %+v, %v; want one failure", rr, err)
	}
	leaks("a replay failure", rr.Failed[0].Err.Error())

	if !strings.Contains(logs.String(), "event parked") {
		t.Errorf("no log line on the parked event:\n%s", logs.String())
	}
	leaks("the log", logs.String())
	mu.Lock()
	defer mu.Unlock()
	if len(outputs) < 2 && status != http.StatusNotFound {
		t.Errorf("%d failed attempts, want 2", len(outputs))
	}
	for _, o := range outputs {
		leaks("an error", o)
		if !strings.Contains(o, host) {
			t.Errorf("error %q does not say which endpoint failed", o)
		}
	}
}

// TestNewNoSecretInError: a URL that New refuses is not printed as given.
func TestNewNoSecretInError(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"ftp://user:" + passwordSecret + "@127.0.0.1/?token=" + tokenSecret,
		"https://user:" + passwordSecret + "@127.0.0.1:bad/?token=" + tokenSecret,
		"https://user:" + passwordSecret + "%zz@127.0.0.1/?token=" + tokenSecret,
	} {
		_, err := webhook.New(webhook.Config{URL: raw, Secret: secret})
		if err == nil {
			t.Errorf("New(%q) accepted the URL", raw)
			continue
		}
		for _, s := range []string{passwordSecret, tokenSecret} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("New: %v", err)
			}
		}
	}
	_, err := webhook.New(webhook.Config{URL: "https://user:" + passwordSecret + "@127.0.0.1/?token=" + tokenSecret, Secret: []byte("whsec_%")})
	if err == nil || strings.Contains(err.Error(), passwordSecret) || strings.Contains(err.Error(), tokenSecret) {
		t.Errorf("New with a bad secret: %v", err)
	}
}
