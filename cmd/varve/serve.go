package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/webhook"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/server"
)

// Defaults of varve serve.
const (
	defaultServeStore  = "sqlite:varve.db"
	defaultServeListen = "127.0.0.1:7070"
	tokenEnv           = "VARVE_TOKEN"
	shutdownGrace      = 5 * time.Second
)

// serveFlags are the settings of varve serve.
type serveFlags struct {
	store, listen, tokenFile, reports string
	tlsCert, tlsKey                   string
	writes, allowRemote               bool
	replay                            []string
	requestTimeout                    time.Duration
	maxBody                           int64
}

// listening is told the address the server listens on; tests replace it.
var listening = func(string) {}

func serveCmd() *cobra.Command {
	var sf serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API and the web console over a store",
		Long: `serve runs varve's HTTP API (under /api/v1) and its web console over a store, on
127.0.0.1:7070 unless --listen says otherwise. Open the address in a browser and sign in
with the token: the console opens on a dashboard of the store (rates, append latency through
this server, size, consumers' lag), sampled by the server every 2 s while somebody looks.

The token: the contents of --token-file, else $VARVE_TOKEN, else a new random token
that serve writes to a file of its own (mode 0600) and names on stderr; it is never
printed. Every request but /api/v1/health and /api/v1/ready needs it. Writes (appends,
replaying and skipping parked events, moving checkpoints) also need --writes.
--replay-webhook NAME=URL lets the console replay the parked events of subscription
NAME to a webhook (signed with $VARVE_WEBHOOK_SECRET); NAME ends at the first '='
followed by http:// or https://, so a name may hold '=' and the URL's query too. --reports DIR shows the lab's
HTML reports of DIR in the console.

The store: --store, else $VARVE_STORE, else sqlite:varve.db (a file in the current
directory). A SQLite file (a URL or a bare path such as demo.db) is created when
missing; any other store is opened as it is: nothing is created (varve init creates
a PostgreSQL schema or a NATS stream).
A --listen address that is not loopback needs --allow-remote, and TLS (--tls-cert,
--tls-key) is strongly advised: the token travels in every request.
Exit codes: 0 stopped cleanly, 1 an error, 2 usage, 130 interrupted (the usual stop).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return sf.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&sf.store, "store", defaultServeStore, "URL or SQLite file path of the store; $"+storeEnv+" when not given, else the default")
	f.StringVar(&sf.listen, "listen", defaultServeListen, "address to listen on (host:port; port 0 picks a free one)")
	f.StringVar(&sf.tokenFile, "token-file", "", "file holding the bearer token (default $"+tokenEnv+", else a new token in a file serve names)")
	f.BoolVar(&sf.writes, "writes", false, "enable appends, parked replay and skip, and checkpoint resets")
	f.StringVar(&sf.reports, "reports", "", "directory of the lab's HTML reports to show in the console")
	f.StringArrayVar(&sf.replay, "replay-webhook", nil, "NAME=URL: replay subscription NAME's parked events to this http:// or https:// webhook (repeatable); NAME ends at the first '=' followed by http:// or https://, so it may hold '=' (but not '=http://')")
	f.StringVar(&sf.tlsCert, "tls-cert", "", "TLS certificate file (with --tls-key): serve HTTPS")
	f.StringVar(&sf.tlsKey, "tls-key", "", "TLS key file")
	f.BoolVar(&sf.allowRemote, "allow-remote", false, "allow a --listen address that is not loopback")
	f.DurationVar(&sf.requestTimeout, "request-timeout", server.DefaultRequestTimeout, "deadline of each request but live tails")
	f.Int64Var(&sf.maxBody, "max-body", server.DefaultMaxBodyBytes, "largest request body, in bytes")
	return cmd
}

func (sf *serveFlags) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	if err := durationFlag("request-timeout", sf.requestTimeout, false); err != nil {
		return err
	}
	if sf.maxBody < 1 || sf.maxBody > 1<<30 {
		return usagef("--max-body %d: want 1 to %d bytes", sf.maxBody, 1<<30)
	}
	if (sf.tlsCert == "") != (sf.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if err := checkListen(sf.listen, sf.allowRemote); err != nil {
		return err
	}
	t, err := resolveExisting(cmd, sf.store)
	if err != nil {
		return err
	}
	replay, err := replaySinks(sf.replay)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range replay {
			_ = s.Close()
		}
	}()
	var reports fs.FS
	if sf.reports != "" {
		root, err := os.OpenRoot(sf.reports)
		if err != nil {
			return usage(fmt.Errorf("--reports: %w", err))
		}
		defer root.Close()
		reports = root.FS()
	}
	token, cleanup, err := sf.token(stderr)
	if err != nil {
		return err
	}
	defer cleanup()

	meter := server.NewMeter()
	storeCfg := storeConfig(ctx)
	storeCfg.Tracer = meter
	store, created, err := openServeStore(ctx, t, storeCfg)
	if err != nil {
		return err
	}
	defer store.Close()
	if created {
		fmt.Fprintf(stderr, "varve serve: created the store %s\n", t.Label)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := server.Config{
		Store: store, Token: token, Writes: sf.writes, Name: t.Label, Reports: reports, Logger: logger,
		RequestTimeout: sf.requestTimeout, MaxBodyBytes: sf.maxBody, Meter: meter,
	}
	if len(replay) > 0 {
		cfg.Replay = func(sub string) delivery.Sink {
			if s, ok := replay[sub]; ok {
				return s
			}
			return nil
		}
	}
	h, err := server.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", sf.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", sf.listen, err)
	}
	hs := server.NewHTTPServer(ln.Addr().String(), h, logger)
	scheme := "http"
	if sf.tlsCert != "" {
		scheme = "https"
	}
	addr := ln.Addr().String()
	mode := "read-only (--writes enables appends, replays, skips and resets)"
	if sf.writes {
		mode = "writes enabled"
	}
	fmt.Fprintf(stderr, "varve serve: the console is at %s://%s/ over %s (%s), %s\n", scheme, addr, t.Label, store.Features().Name, mode)
	listening(addr)
	served := make(chan error, 1)
	go func() {
		if sf.tlsCert != "" {
			served <- hs.ServeTLS(ln, sf.tlsCert, sf.tlsKey)
		} else {
			served <- hs.Serve(ln)
		}
	}()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	h.Close()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if serr := hs.Shutdown(sctx); serr != nil && err == nil {
		err = serr
	}
	if err == nil {
		err = <-served
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	fmt.Fprintln(stderr, "varve serve: stopped")
	return err
}

// checkListen refuses an address that does not parse, and one off
// loopback without --allow-remote.
func checkListen(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return usagef("--listen %q: want host:port, such as %s", addr, defaultServeListen)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if (ip == nil || !ip.IsLoopback()) && !allowRemote {
		return usagef("--listen %q is not a loopback address: give --allow-remote to serve on the network (with --tls-cert and --tls-key: the token travels in every request)", addr)
	}
	return nil
}

// openServeStore opens the store with cfg as it is, except a SQLite file
// that does not exist yet, which it creates: one command starts a console
// on the embedded store.
func openServeStore(ctx context.Context, t *lab.Target, cfg varve.Config) (*varve.Store, bool, error) {
	if t.Backend == "sqlite" {
		if u, err := url.Parse(t.URL); err == nil {
			path := u.Opaque
			if path == "" {
				path = u.Path
			}
			if path != "" && path != ":memory:" {
				if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
					s, err := open.Store(ctx, t.URL, cfg)
					return s, err == nil, lab.ScrubErr(err)
				}
			}
		}
	}
	s, err := open.Existing(ctx, t.URL, cfg)
	if errors.Is(err, open.ErrNotFound) {
		err = fmt.Errorf("%w%s", err, initHint)
	}
	return s, false, lab.ScrubErr(err)
}

// token returns the bearer token: the file's, the environment's, or a new
// one written to a file of its own (removed by cleanup). It never prints
// the token.
func (sf *serveFlags) token(stderr io.Writer) (string, func(), error) {
	nothing := func() {}
	if sf.tokenFile != "" {
		b, err := os.ReadFile(sf.tokenFile)
		if err != nil {
			return "", nothing, usage(fmt.Errorf("--token-file: %w", err))
		}
		tok := strings.TrimSpace(string(b))
		if err := checkToken(tok); err != nil {
			return "", nothing, usage(fmt.Errorf("--token-file %s: %w", sf.tokenFile, err))
		}
		if fi, err := os.Stat(sf.tokenFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(stderr, "varve serve: warning: %s is readable by others (mode %v); chmod 600 it\n", sf.tokenFile, fi.Mode().Perm())
		}
		return tok, nothing, nil
	}
	if tok := strings.TrimSpace(os.Getenv(tokenEnv)); tok != "" {
		if err := checkToken(tok); err != nil {
			return "", nothing, usage(fmt.Errorf("$%s: %w", tokenEnv, err))
		}
		return tok, nothing, nil
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nothing, err
	}
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	dir, err := os.MkdirTemp("", "varve-serve-")
	if err != nil {
		return "", nothing, err
	}
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nothing, err
	}
	fmt.Fprintf(stderr, "varve serve: a new token is in %s (removed when serve stops; give --token-file or $%s to keep one)\n", file, tokenEnv)
	return tok, func() { os.RemoveAll(dir) }, nil
}

func checkToken(tok string) error {
	switch {
	case len(tok) < server.MinTokenLen:
		return fmt.Errorf("the token must be at least %d characters", server.MinTokenLen)
	case strings.ContainsAny(tok, " \t\r\n"):
		return errors.New("the token must not contain white space")
	}
	return nil
}

// replaySinks builds the webhook sinks of --replay-webhook NAME=URL.
func replaySinks(specs []string) (map[string]*webhook.Sink, error) {
	out := map[string]*webhook.Sink{}
	secret := []byte(os.Getenv("VARVE_WEBHOOK_SECRET"))
	for _, spec := range specs {
		name, hook, ok := splitReplay(spec)
		if !ok {
			_, hook, _ = strings.Cut(spec, "=")
		}
		lab.RegisterSecrets(hook)
		if !ok || name == "" {
			return nil, usage(fmt.Errorf("--replay-webhook %q: want NAME=URL, the URL http:// or https://: %w", lab.Scrub(spec), varve.ErrInvalidArgument))
		}
		if err := varve.CheckName(name); err != nil {
			return nil, usage(fmt.Errorf("--replay-webhook: subscription name: %w", err))
		}
		if _, dup := out[name]; dup {
			return nil, usage(fmt.Errorf("--replay-webhook: %q given twice: %w", name, varve.ErrInvalidArgument))
		}
		w, err := webhook.New(webhook.Config{URL: hook, Secret: secret})
		if err != nil {
			return nil, usage(fmt.Errorf("--replay-webhook %s: %w", name, lab.ScrubErr(err)))
		}
		out[name] = w
	}
	return out, nil
}

// splitReplay splits a --replay-webhook NAME=URL at the first "=" that is
// followed by "http://" or "https://" (in any case): a subscription name
// may hold "=", and so may the URL's query ("?next=https://..."), which
// the first such "=" leaves to the URL. ok is false without one.
func splitReplay(spec string) (name, hook string, ok bool) {
	for i := strings.IndexByte(spec, '='); i >= 0; {
		rest := spec[i+1:]
		if hasPrefixFold(rest, "http://") || hasPrefixFold(rest, "https://") {
			return spec[:i], rest, true
		}
		j := strings.IndexByte(rest, '=')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return "", "", false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
