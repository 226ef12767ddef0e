package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "test-token-0123456789abcdef"

// syncBuffer is a log destination tests read while the server writes.
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

// api is a running server and a client of it.
type api struct {
	t    testing.TB
	url  string
	srv  *server.Server
	log  *syncBuffer
	seen *syncBuffer // every response body, for the secret check
}

// serve starts a server over store with cfg (Store, Token and Logger
// filled in when empty) on a loopback listener, stopped when the test ends.
func serve(t testing.TB, store *varve.Store, cfg server.Config) *api {
	t.Helper()
	a := &api{t: t, log: &syncBuffer{}, seen: &syncBuffer{}}
	cfg.Store = store
	if cfg.Token == "" && !cfg.NoAuth {
		cfg.Token = token
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(a.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	a.url, a.srv = ts.URL, srv
	return a
}

// response is an answer of the server, its body decoded when it is JSON.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// errCode returns the error code of an error response.
func (r response) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r response) errMessage() string {
	e, _ := r.body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// do sends a request with the token (unless tok is "-") and a JSON body
// (unless body is nil; a string is sent as is).
func (a *api) do(method, path string, body any, hdr ...string) response {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	_, _ = a.seen.Write(raw)
	r := response{status: res.StatusCode, header: res.Header, raw: raw}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		dst := any(&r.body)
		if bytes.HasPrefix(raw, []byte("[")) {
			dst = new([]any) // an array (the DCB interface's reads): r.raw has it
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			a.t.Fatalf("%s %s: the JSON body does not decode: %v\n%s", method, path, err, raw)
		}
	}
	return r
}

// want checks the status of r; for an error it checks the JSON error's
// shape: a code, a message, no stack.
func (a *api) want(r response, status int, what string) response {
	a.t.Helper()
	if r.status != status {
		a.t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.raw)
	}
	if status >= 400 {
		if r.errCode() == "" || r.errMessage() == "" {
			a.t.Fatalf("%s: error without a JSON code and message: %s", what, r.raw)
		}
		if bytes.Contains(r.raw, []byte("goroutine ")) || bytes.Contains(r.raw, []byte(".go:")) {
			a.t.Fatalf("%s: the error shows a stack: %s", what, r.raw)
		}
	}
	return r
}

// sseEvent is one server-sent event.
type sseEvent struct {
	id, typ, data string
}

// tail opens the live tail and returns its events as they come, and a
// function that ends it and waits for the reader.
func (a *api) tail(ctx context.Context, query string, hdr ...string) (<-chan sseEvent, func(), *http.Response) {
	a.t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/api/v1/all/tail"+query, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		a.t.Fatalf("tail: %v", err)
	}
	out := make(chan sseEvent, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return
		}
		readSSE(ctx, res.Body, out)
	}()
	return out, func() { cancel(); <-done }, res
}

// readSSE parses server-sent events from r into out until r ends or ctx
// is done.
func readSSE(ctx context.Context, r io.Reader, out chan<- sseEvent) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.typ != "" || ev.data != "" {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data += line[6:]
		}
	}
}

// next returns the next event of type typ (others are skipped), failing
// the test after d.
func next(t testing.TB, ch <-chan sseEvent, typ string, d time.Duration) sseEvent {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the tail ended while waiting for a %q event", typ)
			}
			if ev.typ == typ {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %q event within %v", typ, d)
		}
	}
}
