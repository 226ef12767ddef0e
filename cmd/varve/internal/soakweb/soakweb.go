// Package soakweb serves the browser soak: a self-contained page (no CDN),
// Go's wasm_exec.js and the soakwasm module, on loopback. [Build] compiles
// the module with the go tool; nothing prebuilt is shipped. The page posts
// every memory sample and the run's result back, so the last figures
// survive a tab killed for lack of memory ([Server.Last]).
package soakweb

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
)

//go:embed index.html
var page []byte

// Package is the import path of the WebAssembly module.
const Package = "github.com/varve-go/varve/cmd/varve/internal/soakwasm"

// Module is a built module and the wasm_exec.js of the toolchain that
// built it (the two must match).
type Module struct {
	Wasm, ExecJS string
}

// Build compiles the module into dir with the go tool (GOOS=js
// GOARCH=wasm). It runs from the varve checkout that holds the package: the
// current directory must be inside it.
func Build(ctx context.Context, goTool, dir string) (Module, error) {
	m := Module{Wasm: filepath.Join(dir, "soak.wasm")}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", m.Wasm, Package)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return m, fmt.Errorf("build the soak module (run from a varve checkout): %w\n%s", err, stderr.String())
	}
	out, err := exec.CommandContext(ctx, goTool, "env", "GOROOT").Output()
	if err != nil {
		return m, fmt.Errorf("go env GOROOT: %w", err)
	}
	root := strings.TrimSpace(string(out))
	for _, p := range []string{"lib/wasm/wasm_exec.js", "misc/wasm/wasm_exec.js"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			m.ExecJS = filepath.Join(root, p)
			return m, nil
		}
	}
	return m, fmt.Errorf("no wasm_exec.js under %s: %w", root, os.ErrNotExist)
}

// Server serves the page and the module and keeps what the page posts:
// every sample (the report is built from them, also when the tab dies),
// the run's result, and the end of a module that exited (it could not grow
// its memory).
type Server struct {
	mod     Module
	mu      sync.Mutex
	run     int64 // the run the posts kept are from
	start   json.RawMessage
	samples []Sample
	sample  json.RawMessage
	result  json.RawMessage
	end     json.RawMessage
	agent   string
	seen    time.Time
	done    chan struct{}
	once    sync.Once
}

// Sample is what the server keeps of a sample the page posted: the memory
// sample and the counts as the native soak records them, and the module's
// memory limit.
type Sample struct {
	lab.RecordedSample
	MemoryLimit int64 `json:"memory_limit"`
}

// maxSamples bounds the samples kept: past it every other one is dropped,
// which halves the resolution of a very long run, never its span.
const maxSamples = 20_000

// NewServer serves m.
func NewServer(m Module) *Server { return &Server{mod: m, done: make(chan struct{})} }

// maxReport bounds what the page may post.
const maxReport = 64 << 10

// ServeHTTP serves / (the page), /wasm_exec.js, /soak.wasm, and takes the
// page's POSTs to /report/start, /report/sample, /report/result and
// /report/end, each naming its run (?run=N): a post of a newer run drops
// what the server kept of the older one.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval'; style-src 'unsafe-inline'; img-src data:")
		_, _ = w.Write(page)
	case r.Method == http.MethodGet && r.URL.Path == "/wasm_exec.js":
		w.Header().Set("Content-Type", "text/javascript")
		http.ServeFile(w, r, s.mod.ExecJS)
	case r.Method == http.MethodGet && r.URL.Path == "/soak.wasm":
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeFile(w, r, s.mod.Wasm)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/report/"):
		kind := strings.TrimPrefix(r.URL.Path, "/report/")
		if kind != "start" && kind != "sample" && kind != "result" && kind != "end" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReport+1))
		if err != nil || len(body) > maxReport || !json.Valid(body) {
			http.Error(w, "want a JSON report under 64 KiB", http.StatusBadRequest)
			return
		}
		run, _ := strconv.ParseInt(r.URL.Query().Get("run"), 10, 64)
		s.mu.Lock()
		defer s.mu.Unlock()
		if run < s.run {
			w.WriteHeader(http.StatusNoContent) // from a run the page has left
			return
		}
		if run > s.run {
			s.run, s.start, s.samples, s.sample, s.result, s.end = run, nil, nil, nil, nil, nil
		}
		s.seen, s.agent = time.Now(), r.UserAgent()
		switch kind {
		case "start":
			s.start = body
		case "sample":
			s.sample = body
			var sm Sample
			if json.Unmarshal(body, &sm) == nil {
				if len(s.samples) >= maxSamples {
					kept := s.samples[:0]
					for i := 0; i < len(s.samples); i += 2 {
						kept = append(kept, s.samples[i])
					}
					s.samples = kept
				}
				s.samples = append(s.samples, sm)
			}
		case "result":
			s.result = body
			s.once.Do(func() { close(s.done) })
		case "end":
			s.end = body
			s.once.Do(func() { close(s.done) })
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

// Done is closed when the page has posted a run's result, or the end of a
// module that exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Quiet reports how long ago the page last posted anything; 0 before it
// posted.
func (s *Server) Quiet() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen.IsZero() {
		return 0
	}
	return time.Since(s.seen)
}

// ErrNothingYet is Last's error before the page posted anything.
var ErrNothingYet = errors.New("soakweb: the page has posted nothing yet")

// Last returns the last sample and the result the page posted (JSON; the
// result nil while the run goes on or when the tab died).
func (s *Server) Last() (sample, result json.RawMessage, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sample == nil && s.result == nil {
		return nil, nil, ErrNothingYet
	}
	return s.sample, s.result, nil
}
