package delivery

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/varve-go/varve"
)

// Headers of a webhook request. The signature follows the Standard Webhooks
// scheme (webhook-id, webhook-timestamp, webhook-signature: "v1,<base64 of
// HMAC-SHA256(secret, id.timestamp.body)>"), with the raw shared secret as
// the key.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderWebhookID      = "Webhook-Id"
	HeaderTimestamp      = "Webhook-Timestamp"
	HeaderSignature      = "Webhook-Signature"
	HeaderAttempt        = "Varve-Attempt"
)

// DefaultWebhookTimeout bounds one webhook request.
const DefaultWebhookTimeout = 10 * time.Second

// WebhookConfig configures a [Webhook].
type WebhookConfig struct {
	// URL is the endpoint, http or https.
	URL string
	// Secret is the shared secret that signs each request; required.
	Secret []byte
	// Timeout bounds one request, from connecting to reading the status;
	// default 10s. A timeout is retried.
	Timeout time.Duration
	// MaxConcurrency bounds the requests in flight to the endpoint; 0 for
	// no bound beyond the dispatcher's concurrency.
	MaxConcurrency int
	// Header holds extra headers for every request.
	Header http.Header
	// Client sends the requests; default a client of its own whose
	// connection pool fits MaxConcurrency and that follows no redirect.
	Client *http.Client
}

// Webhook is a [Sink] that POSTs each event as JSON ([Payload]) to one
// endpoint. A 2xx status means delivered; 408, 425, 429 and 5xx, a timeout
// or a network error are retried (after Retry-After when the response has
// one); any other status (3xx, 4xx) is permanent and parks the event.
type Webhook struct {
	url       string
	secret    []byte
	timeout   time.Duration
	sem       chan struct{}
	header    http.Header
	client    *http.Client
	transport *http.Transport // ours, to close
	now       func() time.Time
}

// NewWebhook returns a webhook sink.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("delivery: webhook URL %q: want http(s)://host/...: %w", cfg.URL, varve.ErrInvalidArgument)
	}
	if len(cfg.Secret) == 0 {
		return nil, fmt.Errorf("delivery: webhook %s: %w: empty secret", u.Redacted(), varve.ErrInvalidArgument)
	}
	if cfg.Timeout < 0 || cfg.MaxConcurrency < 0 {
		return nil, fmt.Errorf("delivery: webhook %s: %w: negative timeout or concurrency", u.Redacted(), varve.ErrInvalidArgument)
	}
	w := &Webhook{url: cfg.URL, secret: cfg.Secret, timeout: cfg.Timeout, header: cfg.Header, client: cfg.Client, now: time.Now}
	if w.timeout == 0 {
		w.timeout = DefaultWebhookTimeout
	}
	if cfg.MaxConcurrency > 0 {
		w.sem = make(chan struct{}, cfg.MaxConcurrency)
	}
	if w.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 0
		t.MaxConnsPerHost = cfg.MaxConcurrency
		t.MaxIdleConnsPerHost = cfg.MaxConcurrency
		if cfg.MaxConcurrency == 0 {
			t.MaxIdleConnsPerHost = 1024
		}
		w.transport = t
		w.client = &http.Client{
			Transport:     t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return w, nil
}

// Close closes the idle connections of the webhook's own client.
func (w *Webhook) Close() error {
	if w.transport != nil {
		w.transport.CloseIdleConnections()
	}
	return nil
}

// StatusError is a webhook response with a status other than 2xx.
type StatusError struct {
	URL        string
	StatusCode int
	Body       string // the start of the response body
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("webhook %s answered %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Deliver implements Sink.
func (w *Webhook) Deliver(ctx context.Context, d Delivery) error {
	body, err := MarshalPayload(d)
	if err != nil {
		return Permanent(err)
	}
	if w.sem != nil {
		select {
		case w.sem <- struct{}{}:
			defer func() { <-w.sem }()
		case <-ctx.Done():
			return fmt.Errorf("delivery: webhook %s: wait for a free connection: %w", w.url, ctx.Err())
		}
	}
	rctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return Permanent(fmt.Errorf("delivery: webhook %s: %w", w.url, err))
	}
	for k, vs := range w.header {
		req.Header[k] = vs
	}
	ts := strconv.FormatInt(w.now().Unix(), 10)
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "varve-delivery")
	h.Set(HeaderIdempotencyKey, d.Key)
	h.Set(HeaderWebhookID, d.Key)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, sign(w.secret, d.Key, ts, body))
	h.Set(HeaderAttempt, strconv.Itoa(d.Attempt))

	resp, err := w.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("delivery: webhook %s: %w", w.url, ctx.Err())
		}
		return fmt.Errorf("delivery: webhook %s: %w", w.url, err)
	}
	var snippet [256]byte
	n, _ := io.ReadFull(resp.Body, snippet[:])
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection is reused
	resp.Body.Close()
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	serr := &StatusError{URL: w.url, StatusCode: code, Body: strings.TrimSpace(string(snippet[:n]))}
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if after, ok := parseRetryAfter(resp.Header.Get("Retry-After"), w.now()); ok {
			return RetryAfter(serr, after)
		}
		return serr
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly || code >= 500:
		return serr
	}
	return Permanent(serr)
}

func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(min(s, math.MaxInt32)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func sign(secret []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is returned by [VerifyWebhook] for a request that was not
// signed with the secret, or is too old.
var ErrBadSignature = errors.New("delivery: bad webhook signature")

// VerifyWebhook checks the signature of a webhook request, for receivers:
// h holds the request's headers and body its body. With tolerance > 0, a
// timestamp further than tolerance from now fails too (replay protection).
func VerifyWebhook(secret []byte, h http.Header, body []byte, tolerance time.Duration) error {
	id, ts, sigs := h.Get(HeaderWebhookID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: missing %s, %s or %s", ErrBadSignature, HeaderWebhookID, HeaderTimestamp, HeaderSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", ErrBadSignature, ts)
	}
	if age := time.Since(time.Unix(sec, 0)); tolerance > 0 && (age > tolerance || age < -tolerance) {
		return fmt.Errorf("%w: timestamp %s is %v away", ErrBadSignature, ts, age.Round(time.Second))
	}
	want := sign(secret, id, ts, body)
	for sig := range strings.FieldsSeq(sigs) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("%w: no signature matches", ErrBadSignature)
}
