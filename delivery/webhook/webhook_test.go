package webhook_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/internal/deliverytest"
	"github.com/varve-go/varve/delivery/webhook"
	"github.com/varve-go/varve/subscription"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = []byte("s3cret")

func testDelivery() delivery.Delivery {
	pos := varve.Position{Seq: 42}
	return delivery.Delivery{
		Subscription: "hooks", Attempt: 1, Key: delivery.Key("hooks", pos),
		Event: varve.RecordedEvent{
			ID: uuid.MustParse("0190a5b0-0000-7000-8000-000000000001"), Type: "OrderPaid",
			Data: []byte(`{"amount":40}`), Metadata: []byte{0xff, 0x00}, Stream: "order-1", Version: 3, Position: pos,
			RecordedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		},
	}
}

func newWebhook(t *testing.T, url string, cfg webhook.Config) *webhook.Sink {
	t.Helper()
	cfg.URL, cfg.Secret = url, secret
	w, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestStatus: what each answer of the endpoint means.
func TestStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		delay      time.Duration
		wantErr    bool
		permanent  bool
		retryAfter time.Duration
	}{
		{name: "200 delivered", status: 200},
		{name: "204 delivered", status: 204},
		{name: "400 parks", status: 400, wantErr: true, permanent: true},
		{name: "404 parks", status: 404, wantErr: true, permanent: true},
		{name: "410 parks", status: 410, wantErr: true, permanent: true},
		{name: "302 parks, no redirect is followed", status: 302, header: map[string]string{"Location": "/elsewhere"}, wantErr: true, permanent: true},
		{name: "408 retries", status: 408, wantErr: true},
		{name: "429 retries", status: 429, wantErr: true},
		{name: "429 with Retry-After", status: 429, header: map[string]string{"Retry-After": "7"}, wantErr: true, retryAfter: 7 * time.Second},
		{name: "500 retries", status: 500, wantErr: true},
		{name: "503 with Retry-After", status: 503, header: map[string]string{"Retry-After": "2"}, wantErr: true, retryAfter: 2 * time.Second},
		{name: "timeout retries", status: 200, delay: 500 * time.Millisecond, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.delay > 0 {
					select {
					case <-time.After(tc.delay):
					case <-r.Context().Done():
					}
				}
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, "answer body")
			}))
			defer srv.Close()
			timeout := time.Minute // an answer comes, however busy the machine
			if tc.delay > 0 {
				timeout = 50 * time.Millisecond
			}
			w := newWebhook(t, srv.URL, webhook.Config{Timeout: timeout})
			err := w.Deliver(context.Background(), testDelivery())
			if (err != nil) != tc.wantErr || delivery.IsPermanent(err) != tc.permanent {
				t.Fatalf("err %v (permanent %v); want error %v, permanent %v", err, delivery.IsPermanent(err), tc.wantErr, tc.permanent)
			}
			var ra *delivery.RetryAfterError
			if got := errors.As(err, &ra); got != (tc.retryAfter > 0) || got && ra.After != tc.retryAfter {
				t.Fatalf("err %v, want retry after %v", err, tc.retryAfter)
			}
			var se *webhook.StatusError
			if tc.wantErr && tc.delay == 0 && (!errors.As(err, &se) || se.StatusCode != tc.status || se.Body != "answer body") {
				t.Fatalf("err %v, want a StatusError with status %d and the body", err, tc.status)
			}
			if tc.delay > 0 && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err %v, want a deadline error", err)
			}
		})
	}
}

// TestSignature: the receiver verifies the signature with the shared
// secret; another secret, a changed body or an old timestamp fail.
func TestSignature(t *testing.T) {
	t.Parallel()
	type request struct {
		header http.Header
		body   []byte
	}
	got := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- request{r.Header.Clone(), body}
	}))
	defer srv.Close()
	w := newWebhook(t, srv.URL, webhook.Config{Header: http.Header{"X-Tenant": {"acme"}}})
	d := testDelivery()
	d.Attempt, d.Event.Position = 3, varve.Position{Commit: 7, Seq: 42}
	d.Key = delivery.Key(d.Subscription, d.Event.Position)
	if err := w.Deliver(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	req := <-got
	if err := webhook.Verify(secret, req.header, req.body, time.Minute); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if req.header.Get("Idempotency-Key") != "hooks:7:42" || req.header.Get("X-Tenant") != "acme" || req.header.Get("Content-Type") != "application/json" ||
		req.header.Get("Varve-Position") != "7:42" || req.header.Get("Varve-Attempt") != "3" || req.header.Get("Webhook-Id") != "hooks:7:42" ||
		req.header.Get("User-Agent") != "varve-delivery" {
		t.Fatalf("headers %v", req.header)
	}
	var p delivery.Payload
	if err := json.Unmarshal(req.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Stream != "order-1" || p.Version != 3 || p.Position != d.Event.Position || string(p.Data) != `{"amount":40}` ||
		string(p.MetadataBase64) != "\xff\x00" || p.IdempotencyKey != "hooks:7:42" || p.ID != d.Event.ID {
		t.Fatalf("payload %+v", p)
	}

	old := req.header.Clone()
	old.Set(webhook.HeaderTimestamp, strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10))
	for _, tc := range []struct {
		name   string
		secret []byte
		header http.Header
		body   []byte
	}{
		{"other secret", []byte("other"), req.header, req.body},
		{"changed body", secret, req.header, append(req.body, ' ')},
		{"old timestamp", secret, old, req.body},
		{"no signature", secret, http.Header{}, req.body},
	} {
		if err := webhook.Verify(tc.secret, tc.header, tc.body, time.Minute); !errors.Is(err, webhook.ErrBadSignature) {
			t.Errorf("%s: got %v, want ErrBadSignature", tc.name, err)
		}
	}
}

// TestRedelivery: through a dispatcher, an endpoint that fails each
// event twice gets the same idempotency key and body on every attempt, and
// never more requests at once than the endpoint's limit.
func TestRedelivery(t *testing.T) {
	t.Parallel()
	const limit = 2
	var (
		mu       sync.Mutex
		keys     = map[string][]string{} // position -> keys seen
		bodies   = map[string]string{}
		inFlight atomic.Int32
		maxSeen  atomic.Int32
		badBody  atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
		}
		body, _ := io.ReadAll(r.Body)
		if webhook.Verify(secret, r.Header, body, time.Minute) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var p delivery.Payload
		_ = json.Unmarshal(body, &p)
		pos := p.Position.String()
		time.Sleep(time.Millisecond)
		mu.Lock()
		keys[pos] = append(keys[pos], r.Header.Get(delivery.HeaderIdempotencyKey))
		if b, ok := bodies[pos]; ok && b != string(body) {
			badBody.Add(1)
		}
		bodies[pos] = string(body)
		attempts := len(keys[pos])
		mu.Unlock()
		if attempts <= 2 {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	s := deliverytest.NewStore(t)
	end := deliverytest.Fill(t, s, "hook", 10, 30, 3)
	w := newWebhook(t, srv.URL, webhook.Config{MaxConcurrency: limit})
	r := deliverytest.Start(t, s, "hooks", w, delivery.Config{Concurrency: 8, Retry: subscription.RetryPolicy{InitialBackoff: time.Millisecond}})
	r.Wait(t, end)
	r.Stop(t)
	if st := r.D.Stats(); st.Delivered != 30 || st.Parked != 0 || st.Attempts != 90 {
		t.Fatalf("stats %+v, want 30 delivered in 90 attempts", st)
	}
	mu.Lock()
	defer mu.Unlock()
	for pos, ks := range keys {
		if len(ks) != 3 || ks[0] != "hooks:"+pos || ks[1] != ks[0] || ks[2] != ks[0] {
			t.Fatalf("position %s: keys %v", pos, ks)
		}
	}
	if badBody.Load() != 0 {
		t.Fatalf("%d redeliveries changed the body", badBody.Load())
	}
	if m := maxSeen.Load(); m > limit {
		t.Fatalf("%d requests at once, limit %d", m, limit)
	}
}

// TestPermanentParks: a 4xx parks the event after one attempt.
func TestPermanentParks(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
	}))
	defer srv.Close()
	s := deliverytest.NewStore(t)
	res, err := s.Append(context.Background(), "bad", varve.NoStream, varve.Event{Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	r := deliverytest.Start(t, s, "hooks-4xx", newWebhook(t, srv.URL, webhook.Config{}), delivery.Config{})
	r.Wait(t, res.Position)
	r.Stop(t)
	parked, err := r.D.Parked().List(context.Background())
	if err != nil || len(parked) != 1 || parked[0].Reason != delivery.ReasonRejected || parked[0].Attempts != 1 {
		t.Fatalf("parked %+v, %v", parked, err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []webhook.Config{
		{URL: "ftp://x", Secret: secret},
		{URL: "http://", Secret: secret},
		{URL: "http://127.0.0.1:1/"},
		{URL: "http://127.0.0.1:1/", Secret: secret, Timeout: -1},
	} {
		if _, err := webhook.New(cfg); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("%+v: got %v, want ErrInvalidArgument", cfg, err)
		}
	}
}

// TestContextHeaders: headers from the context go with the request, and
// the sink's own (the idempotency key, the signature) win over them.
func TestContextHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer srv.Close()
	w := newWebhook(t, srv.URL, webhook.Config{})
	d := testDelivery()
	ctx := delivery.WithHeaders(context.Background(), map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
	ctx = delivery.WithHeaders(ctx, map[string]string{"Idempotency-Key": "forged", "X-Extra": "1"})
	if err := w.Deliver(ctx, d); err != nil {
		t.Fatal(err)
	}
	h := <-got
	for k, want := range map[string]string{
		"Traceparent":     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"X-Extra":         "1",
		"Idempotency-Key": d.Key,
	} {
		if v := h.Values(k); len(v) != 1 || v[0] != want {
			t.Errorf("header %s: %q, want %q", k, v, want)
		}
	}
}

// TestBasicAuth: the user and password of the URL go as basic auth, both
// through the sink's own client and through one of the caller's; an
// Authorization header of Config.Header wins.
func TestBasicAuth(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
	}))
	defer srv.Close()
	withUser := strings.Replace(srv.URL, "http://", "http://ann:pw@", 1)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ann:pw"))
	for _, tc := range []struct {
		name string
		cfg  webhook.Config
		want string
	}{
		{"own client", webhook.Config{}, basic},
		{"caller's client", webhook.Config{Client: &http.Client{}}, basic},
		{"header wins", webhook.Config{Header: http.Header{"Authorization": {"Bearer t"}}}, "Bearer t"},
	} {
		w := newWebhook(t, withUser, tc.cfg)
		if err := w.Deliver(context.Background(), testDelivery()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if a := <-got; a != tc.want {
			t.Errorf("%s: Authorization %q, want %q", tc.name, a, tc.want)
		}
	}
}
