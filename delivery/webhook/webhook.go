// Package webhook is a [delivery.Sink] that POSTs events to an HTTP
// endpoint, signed as the Standard Webhooks scheme says, and the check of
// that signature for receivers ([Verify]). It is a package of its own, as
// each transport of package delivery is.
//
// Each event goes as its JSON [delivery.Payload]. A 2xx status means
// delivered; 408, 425, 429 and 5xx, a timeout or a network error are
// retried (after Retry-After when the response has one); any other status
// (3xx, 4xx) is permanent and parks the event. Headers that the context
// of Deliver carries ([delivery.WithHeaders]) go with the request. Deliver
// is safe for concurrent use.
package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
)

// Headers of a webhook request besides [delivery.HeaderIdempotencyKey] and
// [delivery.HeaderAttempt]. The signature follows the Standard Webhooks
// scheme: webhook-id (the idempotency key), webhook-timestamp (Unix
// seconds) and webhook-signature ("v1,<base64 of HMAC-SHA256(key,
// id.timestamp.body)>"), with the key of [ParseSecret].
const (
	HeaderID        = "Webhook-Id"
	HeaderTimestamp = "Webhook-Timestamp"
	HeaderSignature = "Webhook-Signature"
)

// DefaultTimeout bounds one webhook request.
const DefaultTimeout = 10 * time.Second

// Config configures a [Sink].
type Config struct {
	// URL is the endpoint, http or https. It may carry credentials
	// (user:password@, ?token=...): errors, StatusError, the sink's String
	// and so logs and parked records show it with them masked.
	URL string
	// Secret is the shared secret that signs each request; required. In
	// the Standard Webhooks form "whsec_<base64>" the key is the decoded
	// base64, as every Standard Webhooks verifier expects; otherwise the
	// bytes are the key as they are ([ParseSecret]).
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

// Sink POSTs each event to one endpoint.
type Sink struct {
	ep        endpoint
	key       []byte // of the signature
	timeout   time.Duration
	sem       chan struct{}
	header    http.Header
	client    *http.Client
	transport *http.Transport // ours, to close
	now       func() time.Time
	signers   sync.Pool // of *signer
}

// New returns a webhook sink.
func New(cfg Config) (*Sink, error) {
	ep := newEndpoint(cfg.URL)
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook: URL %s: want http(s)://host/...: %w", ep.shown, varve.ErrInvalidArgument)
	}
	key, err := ParseSecret(string(cfg.Secret))
	if err != nil {
		return nil, fmt.Errorf("webhook %s: %w", ep.shown, err)
	}
	if cfg.Timeout < 0 || cfg.MaxConcurrency < 0 {
		return nil, fmt.Errorf("webhook %s: %w: negative timeout or concurrency", ep.shown, varve.ErrInvalidArgument)
	}
	w := &Sink{ep: ep, key: key, timeout: cfg.Timeout, header: cfg.Header, client: cfg.Client, now: time.Now}
	w.signers.New = w.newSigner
	if w.timeout == 0 {
		w.timeout = DefaultTimeout
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

// String describes the sink by its endpoint, without the URL's secrets.
func (w *Sink) String() string { return "webhook " + w.ep.shown }

// Close closes the idle connections of the webhook's own client.
func (w *Sink) Close() error {
	if w.transport != nil {
		w.transport.CloseIdleConnections()
	}
	return nil
}

// StatusError is a webhook response with a status other than 2xx.
type StatusError struct {
	URL        string // the endpoint, without its secrets
	StatusCode int
	Body       string // the start of the response body, without the URL's secrets
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("webhook %s answered %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Deliver implements delivery.Sink.
func (w *Sink) Deliver(ctx context.Context, d delivery.Delivery) error {
	body, err := delivery.MarshalPayload(d)
	if err != nil {
		return delivery.Permanent(err)
	}
	if w.sem != nil {
		select {
		case w.sem <- struct{}{}:
			defer func() { <-w.sem }()
		case <-ctx.Done():
			return fmt.Errorf("webhook %s: wait for a free connection: %w", w.ep.shown, ctx.Err())
		}
	}
	rctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, w.ep.raw, bytes.NewReader(body))
	if err != nil {
		return delivery.Permanent(fmt.Errorf("webhook: %w", w.ep.requestError(err)))
	}
	extra := delivery.HeadersFrom(ctx)
	h := make(http.Header, len(w.header)+len(extra)+len(ownHeaders)+1)
	req.Header = h
	for k, vs := range w.header {
		h[k] = vs
	}
	for k, v := range extra {
		h.Set(k, v)
	}
	w.setHeaders(h, d, body)
	resp, err := w.send(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("webhook %s: %w", w.ep.shown, ctx.Err())
		}
		return fmt.Errorf("webhook: %w", w.ep.requestError(err))
	}
	var snippet [256]byte
	n, _ := io.ReadFull(resp.Body, snippet[:])
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection is reused
	resp.Body.Close()
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	serr := &StatusError{URL: w.ep.shown, StatusCode: code, Body: w.ep.scrub(strings.TrimSpace(string(snippet[:n])))}
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if after, ok := parseRetryAfter(resp.Header.Get("Retry-After"), w.now()); ok {
			return delivery.RetryAfter(serr, after)
		}
		return serr
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly || code >= 500:
		return serr
	}
	return delivery.Permanent(serr)
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
