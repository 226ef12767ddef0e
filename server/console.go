package server

import (
	"embed"
	"net/http"
	"path"
	"strings"
)

// The console: one page, a script and a style sheet, embedded in the
// binary. It loads nothing from elsewhere.
//
//go:embed assets
var assets embed.FS

// apiCSP is the policy of API responses: they are data, never a page.
const apiCSP = "default-src 'none'; frame-ancestors 'none'"

// consoleCSP lets the console run its own script and talk to its own
// API. Inline styles are allowed for the lab's reports, which the console
// shows in sandboxed srcdoc frames (those inherit this policy); no inline
// script runs.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var assetTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

func (s *Server) consoleIndex(w http.ResponseWriter, r *http.Request) error {
	return serveAsset(w, "index.html")
}

func (s *Server) consoleAsset(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("file")
	if name == "index.html" || strings.Contains(name, "/") {
		return s.noRoute(w, r)
	}
	return serveAsset(w, name)
}

func serveAsset(w http.ResponseWriter, name string) error {
	typ, ok := assetTypes[path.Ext(name)]
	b, err := assets.ReadFile("assets/" + name)
	if !ok || err != nil {
		return &apiError{status: http.StatusNotFound, code: "not_found", msg: "no console file " + name}
	}
	h := w.Header()
	h.Set("Content-Type", typ)
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}
