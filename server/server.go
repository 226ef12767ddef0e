package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
)

// Defaults and limits of a [Config].
const (
	DefaultMaxBodyBytes   = 8 << 20
	DefaultRequestTimeout = 30 * time.Second
	DefaultMaxFollowers   = 256
	DefaultHeartbeat      = 15 * time.Second
	DefaultPollInterval   = 500 * time.Millisecond
	DefaultLagLimit       = 10_000
	DefaultMaxPageBytes   = 4 << 20
	DefaultMaxReadBytes   = 32 << 20
	// MaxByteLimit bounds Config.MaxPageBytes and MaxReadBytes: a quarter
	// of the int range, so that a share of the budget never overflows.
	MaxByteLimit = math.MaxInt >> 2
	// MinTokenLen is the shortest token New accepts.
	MinTokenLen = 16
	// DefaultPageLimit and MaxPageLimit bound the events or names of a page.
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// Config configures a [Server]. Store and, unless NoAuth, Token are
// required; the zero values of the rest are the defaults.
type Config struct {
	Store *varve.Store
	// Token is the bearer token every request but health and readiness
	// must carry: at least MinTokenLen bytes. Read it from a file or the
	// environment, never from a command-line flag.
	Token string
	// NoAuth serves without a token, for an application that mounts the
	// handler behind authentication of its own. Token must then be empty.
	NoAuth bool
	// Writes enables the mutating endpoints: append, stream truncate,
	// delete and tombstone, parked replay and skip, checkpoint reset,
	// projection control, retention policies.
	Writes bool
	// Name labels the store in the console: a short name, never a URL
	// with credentials.
	Name string
	// Replay returns the sink that parked events of a subscription are
	// replayed to, or nil when there is none; a nil Replay refuses every
	// replay.
	Replay func(subscription string) delivery.Sink
	// Reports holds the lab's HTML reports (*.html at its top level) that
	// the console shows; nil for none.
	Reports fs.FS
	// Logger receives one line per request (method, path, status,
	// duration), never a header or a body. Nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body; default 8 MiB.
	MaxBodyBytes int64
	// RequestTimeout bounds every request but live tails; default 30s.
	RequestTimeout time.Duration
	// MaxFollowers bounds the live tails served at once; default 256.
	MaxFollowers int
	// Heartbeat is how often a quiet live tail sends a comment, so that
	// proxies and clients see the connection alive; default 15s.
	Heartbeat time.Duration
	// PollInterval is how often a live tail reads $all when the backend
	// cannot wake it up; default 500ms.
	PollInterval time.Duration
	// LagLimit bounds the events counted for a consumer's lag; default
	// 10,000 (a larger lag shows as "more than").
	LagLimit int
	// MaxPageBytes bounds the event data and metadata of a page of the
	// API and of each batch a live tail writes: a page ends at its limit
	// or at the event that takes it to this many bytes, whichever comes
	// first, and holds at least one event however big; default 4 MiB.
	MaxPageBytes int
	// MaxReadBytes bounds the event data and metadata that all responses
	// hold at once (pages, live tails, lag counts): a response waits for
	// its share, and gives it back as it writes; default 32 MiB. A page
	// read takes MaxPageBytes plus the store's MaxEventSize before it
	// reads (all of MaxReadBytes when that is more) and keeps what it got.
	MaxReadBytes int
	// SampleInterval is how often the dashboard samples the store, from
	// the first dashboard request on; default 2s, at least
	// MinSampleInterval.
	SampleInterval time.Duration
	// Meter, when set, is the Meter passed as the store's
	// varve.Config.Tracer: the dashboard shows its appends, reads and
	// append latencies. Nil: the dashboard says they are not measured.
	Meter *Meter
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Store == nil:
		return c, errors.New("server: Config.Store is nil")
	case c.NoAuth && c.Token != "":
		return c, errors.New("server: Config.NoAuth with a Token: choose one")
	case !c.NoAuth && len(c.Token) < MinTokenLen:
		return c, fmt.Errorf("server: the token must be at least %d bytes (or set Config.NoAuth behind authentication of your own)", MinTokenLen)
	case strings.ContainsAny(c.Token, " \t\r\n"):
		return c, errors.New("server: the token must not contain white space")
	case c.MaxBodyBytes < 0 || c.RequestTimeout < 0 || c.MaxFollowers < 0 || c.Heartbeat < 0 || c.PollInterval < 0 || c.LagLimit < 0 ||
		c.MaxPageBytes < 0 || c.MaxReadBytes < 0 || c.SampleInterval < 0:
		return c, errors.New("server: negative limit in Config")
	case c.SampleInterval > 0 && c.SampleInterval < MinSampleInterval:
		return c, fmt.Errorf("server: SampleInterval is at least %v", MinSampleInterval)
	case c.MaxPageBytes > MaxByteLimit || c.MaxReadBytes > MaxByteLimit:
		return c, fmt.Errorf("server: MaxPageBytes and MaxReadBytes are at most %d", MaxByteLimit)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxFollowers == 0 {
		c.MaxFollowers = DefaultMaxFollowers
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.LagLimit == 0 {
		c.LagLimit = DefaultLagLimit
	}
	if c.MaxPageBytes == 0 {
		c.MaxPageBytes = DefaultMaxPageBytes
	}
	if c.MaxReadBytes == 0 {
		c.MaxReadBytes = DefaultMaxReadBytes
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = DefaultSampleInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Server is the handler. Create it with [New]; it is safe for concurrent
// use.
type Server struct {
	cfg       Config
	store     *varve.Store
	mux       *http.ServeMux
	token     [sha256.Size]byte
	log       *slog.Logger
	life      context.Context // ends at Close: live tails stop
	stop      context.CancelFunc
	followers atomic.Int64
	budget    *budget  // of Config.MaxReadBytes
	apiRoutes []string // the patterns of the API's routes, as registered
	dash      *sampler
}

// New returns a Server over cfg.Store. The Server does not own the store:
// close the store after the Server.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: cfg.Store, mux: http.NewServeMux(), log: cfg.Logger, budget: newBudget(cfg.MaxReadBytes)}
	s.token = sha256.Sum256([]byte(cfg.Token))
	s.life, s.stop = context.WithCancel(context.Background())
	s.dash = newSampler(s)
	s.routes()
	return s, nil
}

// Close ends the live tails in flight; later tails are refused with 503.
// It stops the dashboard's sampler and waits for it. The handler still
// answers other requests. It is idempotent.
func (s *Server) Close() error {
	s.stop()
	s.dash.close()
	return nil
}

// access says what a route needs.
type access uint8

const (
	public access = iota // health, readiness, the console's static files
	read                 // the token
	write                // the token and Config.Writes
)

// handlerFunc is a route's handler: an error it returns becomes the JSON
// error response, unless the handler already wrote a response.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) routes() {
	api := func(pattern string, a access, live bool, h handlerFunc) {
		s.mux.Handle(pattern, s.wrap(a, live, h))
		s.apiRoutes = append(s.apiRoutes, pattern)
	}
	api("GET /api/v1/health", public, false, s.health)
	api("GET /api/v1/ready", public, false, s.ready)
	api("GET /api/v1/openapi.json", read, false, s.openAPI)
	api("GET /api/v1/info", read, false, s.info)
	api("GET /api/v1/dashboard", read, false, s.dashboard)
	api("GET /api/v1/streams", read, false, s.listStreams)
	api("GET /api/v1/streams/{id}", read, false, s.streamInfo)
	api("GET /api/v1/streams/{id}/events", read, false, s.readStream)
	api("POST /api/v1/streams/{id}/events", write, false, s.appendEvents)
	api("POST /api/v1/streams/{id}/truncate", write, false, s.truncateStream)
	api("DELETE /api/v1/streams/{id}", write, false, s.deleteStream)
	api("GET /api/v1/all", read, false, s.readAll)
	api("GET /api/v1/all/tail", read, true, s.tail)
	api("GET /api/v1/events", read, false, s.searchEvents)
	api("GET /api/v1/dcb/read", read, false, s.dcbRead)
	api("POST /api/v1/dcb/append", write, false, s.dcbAppend)
	api("GET /api/v1/subscriptions", read, false, s.listSubscriptions)
	api("GET /api/v1/subscriptions/{name}", read, false, s.subscription)
	api("POST /api/v1/subscriptions/{name}/parked/replay", write, false, s.replayParked)
	api("POST /api/v1/subscriptions/{name}/parked/skip", write, false, s.skipParked)
	api("POST /api/v1/subscriptions/{name}/reset", write, false, s.resetCheckpoint)
	api("GET /api/v1/projections", read, false, s.listProjections)
	api("GET /api/v1/projections/{name}", read, false, s.projectionInfo)
	api("POST /api/v1/projections/{name}/pause", write, false, s.controlProjection("pause"))
	api("POST /api/v1/projections/{name}/resume", write, false, s.controlProjection("resume"))
	api("POST /api/v1/projections/{name}/rebuild", write, false, s.controlProjection("rebuild"))
	api("POST /api/v1/projections/{name}/promote", write, false, s.controlProjection("promote"))
	api("GET /api/v1/retention", read, false, s.getRetention)
	api("PUT /api/v1/retention", write, false, s.putRetention)
	api("DELETE /api/v1/retention", write, false, s.deleteRetention)
	api("GET /api/v1/erasures", read, false, s.listErasures)
	api("POST /api/v1/erasures", write, false, s.erase)
	api("GET /api/v1/workflows/{name}", read, false, s.listWorkflows)
	api("GET /api/v1/workflows/{name}/instances/{instance}", read, false, s.workflowInstance)
	api("POST /api/v1/workflows/{name}/instances/{instance}/cancel", write, false, s.cancelWorkflow)
	api("POST /api/v1/workflows/{name}/instances/{instance}/retry", write, false, s.retryWorkflow)
	api("GET /api/v1/reports", read, false, s.listReports)
	api("GET /api/v1/reports/{name}", read, false, s.report)
	s.mux.Handle("/api/", s.wrap(public, false, s.noRoute))
	s.mux.Handle("GET /{$}", s.wrap(public, false, s.consoleIndex))
	s.mux.Handle("GET /assets/{file}", s.wrap(public, false, s.consoleAsset))
	s.mux.Handle("/", s.wrap(public, false, s.noRoute))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// wrap runs h behind the checks of its access, a deadline unless it is a
// live tail, the security headers, the body limit, panic recovery and the
// request log.
func (s *Server) wrap(a access, live bool, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		hdr := w.Header()
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("Content-Security-Policy", apiCSP)
		if r.TLS != nil {
			hdr.Set("Strict-Transport-Security", hsts)
		}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic in handler", "method", r.Method, "path", r.URL.EscapedPath(), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if !rec.wrote {
					writeError(rec, &apiError{status: http.StatusInternalServerError, code: "internal", msg: "internal error"})
				}
			}
			s.log.Info("request", "method", r.Method, "path", r.URL.EscapedPath(), "status", rec.status(), "duration", time.Since(start))
		}()
		if a != public && !s.authorized(r) {
			rec.Header().Set("WWW-Authenticate", `Bearer realm="varve"`)
			writeError(rec, &apiError{status: http.StatusUnauthorized, code: "unauthorized", msg: "this endpoint needs the server's bearer token (Authorization: Bearer ...)"})
			return
		}
		if a == write && !s.cfg.Writes {
			writeError(rec, &apiError{status: http.StatusForbidden, code: "writes_disabled", msg: "writes are disabled: start the server with writes enabled (varve serve --writes)"})
			return
		}
		if !live && r.Body != nil && r.Body != http.NoBody {
			// The context's deadline does not end a read of the body: a
			// client sending it slowly held the handler for as long as it
			// liked. net/http clears the deadline once the body is read.
			// Only a request with a body gets one: on a request without,
			// the server reads ahead on the connection, and a deadline
			// there would cancel the request instead.
			_ = http.NewResponseController(w).SetReadDeadline(start.Add(s.cfg.RequestTimeout))
		}
		r.Body = http.MaxBytesReader(rec, r.Body, s.cfg.MaxBodyBytes)
		if !live {
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		if err := h(rec, r); err != nil && !rec.wrote {
			writeError(rec, s.apiErr(r, err))
		}
	})
}

// authorized checks the bearer token in constant time (over its hash, so
// its length does not leak either).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.NoAuth {
		return true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	switch {
	case ok && strings.EqualFold(scheme, "Basic"):
		// The token as a password, for clients that take credentials in
		// a URL only (the DCB suite's adapter), on the DCB interface only:
		// a browser may keep Basic credentials and send them by itself.
		_, pass, basic := r.BasicAuth()
		if !basic || !strings.HasPrefix(r.URL.Path, "/api/v1/dcb/") {
			return false
		}
		tok = pass
	case !ok || !strings.EqualFold(scheme, "Bearer"):
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// hsts keeps a browser that reached the server over TLS on TLS for two
// years.
const hsts = "max-age=63072000"

// noRoute answers a request no route serves. Where routes serve the path
// with other methods, OPTIONS is a 204 and any other method a 405, both
// with the methods in Allow; elsewhere it is a 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/api/" && pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if allow == nil {
		return &apiError{status: http.StatusNotFound, code: "no_such_endpoint", msg: fmt.Sprintf("no endpoint %s %s (the API is under /api/v1)", r.Method, r.URL.EscapedPath())}
	}
	methods := strings.Join(append(allow, http.MethodOptions), ", ")
	w.Header().Set("Allow", methods)
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", msg: fmt.Sprintf("%s %s: this endpoint takes %s", r.Method, r.URL.EscapedPath(), methods)}
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ready answers 200 when the store answers a LastPosition within the
// request's time; it says no more than "unavailable" otherwise.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.store.LastPosition(ctx); err != nil {
		s.log.Warn("not ready", "err", err.Error())
		return writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable",
			"error": map[string]string{"code": "unavailable", "message": "the store does not answer"}})
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// recorder notes what a handler wrote, for the log and for the error path.
type recorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.code, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if !r.wrote {
		return http.StatusOK
	}
	return r.code
}
