package server

import (
	"log/slog"
	"net/http"
	"time"
)

// NewHTTPServer returns an http.Server for h on addr with the timeouts a
// server facing clients it does not control needs: 10 s to send the
// headers, 60 s to send a body (the handler cuts that to
// Config.RequestTimeout), 2 minutes to take a response, 2 minutes idle, 64
// KiB of headers. A live tail moves its own write deadline at
// each flush, so it outlives these; the handler also bounds every other
// request (Config.RequestTimeout). Errors of the listener go to logger.
func NewHTTPServer(addr string, h http.Handler, logger *slog.Logger) *http.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
