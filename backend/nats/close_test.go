package nats

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/varve-go/varve"
)

// proxy forwards TCP connections to a server and can stop forwarding what
// the server sends once a number of bytes went through: a server that
// stops answering in the middle of a reply, with the connection up.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	budget int64 // bytes still forwarded from the server; < 0: no limit
	frozen bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, serverURL string) *proxy {
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: u.Host, budget: -1}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
		p.wg.Go(func() { p.fromServer(c, s); _ = c.Close() })
	}
}

// fromServer copies from the server to the client while the budget lasts.
func (p *proxy) fromServer(c, s net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.budget == 0 && !p.closed {
				p.frozen = true
				p.cond.Wait()
			}
			if p.closed {
				p.mu.Unlock()
				return
			}
			if p.budget > 0 {
				p.budget = max(p.budget-int64(n), 0)
			}
			p.mu.Unlock()
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// freezeAfter forwards n more bytes from the server, then nothing.
func (p *proxy) freezeAfter(n int64) {
	p.mu.Lock()
	p.budget, p.frozen = n, false
	p.mu.Unlock()
}

// waitFrozen waits until data from the server is held back.
func (p *proxy) waitFrozen() {
	p.t.Helper()
	waitFor(p.t, "the proxy holds data back", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.frozen
	})
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	conns := p.conns
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

// promptly bounds how long a call may take to return after Close or a
// cancellation. The calls return in well under 100 ms here (logged); the
// bound is generous because the machine is shared and noisy, and what it
// catches is the old behaviour: waiting for the request timeout (10 s).
const promptly = time.Second

// TestCloseInterrupts: a call waiting for the server (a stream read of 30k
// events or a $all scan in the middle of their data, an append, a
// checkpoint) returns varve.ErrClosed promptly when the backend is closed,
// and the context's error when its context is cancelled, also when the
// connection is not the backend's (so closing it does not end the wait).
func TestCloseInterrupts(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("close"))
		w := m.open(t, cfg)
		const events = 30_000
		for i := 0; i < events/100; i++ {
			if _, err := w.Append(ctxT(t), varve.AppendRequest{Stream: "big", Expected: varve.Any, Events: makeEvents(100, 100)}); err != nil {
				t.Fatal(err)
			}
		}
		ops := []struct {
			name   string
			freeze int64 // bytes from the server before it stops answering
			run    func(context.Context, *Backend) error
		}{
			{"read a stream of 30k events", 256 << 10, func(ctx context.Context, b *Backend) error {
				evs, err := b.ReadStream(ctx, varve.StreamQuery{Stream: "big", Limit: events}, nil)
				if err == nil {
					t.Errorf("the read ended with %d events before the server stopped", len(evs))
				}
				return err
			}},
			{"scan $all", 256 << 10, func(ctx context.Context, b *Backend) error {
				evs, err := b.ReadAll(ctx, varve.AllQuery{Limit: events}, nil)
				if err == nil {
					t.Errorf("the scan ended with %d events before the server stopped", len(evs))
				}
				return err
			}},
			{"append", 0, func(ctx context.Context, b *Backend) error {
				_, err := b.Append(ctx, varve.AppendRequest{Stream: "small", Expected: varve.Any, Events: makeEvents(1, 10)})
				return err
			}},
			{"load a checkpoint", 0, func(ctx context.Context, b *Backend) error {
				_, _, err := b.LoadCheckpoint(ctx, "c")
				return err
			}},
		}
		for _, op := range ops {
			for _, how := range []string{"close", "cancel"} {
				t.Run(op.name+"/"+how, func(t *testing.T) {
					p := newProxy(t, m.url)
					nc, err := natsgo.Connect(p.url())
					if err != nil {
						t.Fatal(err)
					}
					defer nc.Close()
					rcfg := cfg
					rcfg.Conn = nc
					b := m.attach(t, rcfg)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					done := make(chan error, 1)
					p.freezeAfter(op.freeze)
					go func() { done <- op.run(ctx, b) }()
					p.waitFrozen()
					time.Sleep(50 * time.Millisecond) // the call waits
					t0 := time.Now()
					want := varve.ErrClosed
					if how == "close" {
						// Close waits up to a second for the server to delete
						// the consumers of open scans; the call must not.
						closed := make(chan struct{})
						go func() { _ = b.Close(); close(closed) }()
						defer func() { <-closed }()
					} else {
						cancel()
						want = context.Canceled
					}
					select {
					case err := <-done:
						took := time.Since(t0)
						t.Logf("returned %v after %v", err, took)
						if !errors.Is(err, want) {
							t.Fatalf("got %v, want %v", err, want)
						}
						if took > promptly {
							t.Fatalf("returned %v after the %s", took, how)
						}
					case <-time.After(30 * time.Second):
						t.Fatalf("still waiting 30 s after the %s", how)
					}
					p.freezeAfter(-1)
				})
			}
		}
	})
}

// TestOutage: while the server is down, an append fails at once with an
// error that says the server is unreachable, not at the caller's deadline;
// once it is back, appends work again.
func TestOutage(t *testing.T) {
	dir := t.TempDir()
	srv, err := startServer(dir, -1)
	if err != nil {
		t.Fatal(err)
	}
	port := srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	cfg := testConfig(srv.ClientURL(), uniqueName("outage"))
	cfg.Options = []natsgo.Option{natsgo.ReconnectWait(20 * time.Millisecond)}
	b := open(t, cfg)
	if _, err := b.Append(ctxT(t), varve.AppendRequest{Stream: "s", Expected: varve.NoStream, Events: makeEvents(1, 10)}); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	waitFor(t, "the client notices", func() bool { return !b.nc.IsConnected() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err = b.Append(ctx, varve.AppendRequest{Stream: "s", Expected: varve.Exact(1), Events: makeEvents(1, 10)})
	took := time.Since(t0)
	t.Logf("append during the outage: %v after %v", err, took)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("append during the outage: %v, want ErrUnreachable", err)
	}
	if ctx.Err() != nil || took > promptly {
		t.Fatalf("append during the outage returned after %v", took)
	}
	if srv, err = startServer(dir, port); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	waitFor(t, "the client reconnects", b.nc.IsConnected)
	if _, err := b.Append(ctxT(t), varve.AppendRequest{Stream: "s", Expected: varve.Exact(1), Events: makeEvents(1, 10)}); err != nil {
		t.Fatalf("append after the outage: %v", err)
	}
}

// TestNoSecretsInErrors: New and ParseURL never put credentials in an
// error: passwords, tokens (nats://TOKEN@host), nkey or JWT parameters, for
// servers that cannot be reached and for a server that refuses them.
func TestNoSecretsInErrors(t *testing.T) {
	const secret = "s3cr3tValue"
	// A server that wants a user and password.
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true, JetStream: true,
		StoreDir: t.TempDir(), Users: []*server.User{{Username: "varve", Password: "right"}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server with auth did not start")
	}
	defer s.Shutdown()
	authAddr := s.Addr().String()
	urls := []string{
		"nats://varve:" + secret + "@127.0.0.1:1",
		"nats://" + secret + "@127.0.0.1:1",
		"nats://varve:" + secret + "@127.0.0.1:1,nats://varve:" + secret + "@127.0.0.1:2",
		"nats://varve:" + secret + "@" + authAddr,
		"nats://" + secret + "@" + authAddr,
		"nats://127.0.0.1:1?user_jwt=" + secret,
		"nats://127.0.0.1:1?nkey=" + secret,
		"nats://varve:" + secret + "@127.0.0.1:1?timeout=" + secret,
		"nats://varve:%zz" + secret + "@127.0.0.1:1",
		"tls://varve:" + secret + "@127.0.0.1:1",
	}
	for _, raw := range urls {
		cfg, err := ParseURL(raw)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			var b *Backend
			cfg.Options = []natsgo.Option{natsgo.Timeout(time.Second)}
			b, err = New(ctx, cfg)
			cancel()
			if err == nil {
				_ = b.Close()
				t.Fatalf("%s: connected", strings.ReplaceAll(raw, secret, "***"))
			}
		}
		t.Logf("%s: %v", strings.ReplaceAll(raw, secret, "***"), err)
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

// TestErrorsNameNoStream: the Store adds the operation and the stream to
// an error, so the backend's errors carry neither: they say "nats: " once
// and what failed.
func TestErrorsNameNoStream(t *testing.T) {
	const stream = "orders-4711"
	cfg := testConfig(embeddedURL, uniqueName("errs"))
	w := mode{}.open(t, cfg)
	evs := makeEvents(2, 10)
	if _, err := w.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.NoStream, Events: evs}); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		t.Logf("%s: %v", what, err)
		if strings.Contains(err.Error(), stream) {
			t.Errorf("%s: the error names the stream: %v", what, err)
		}
		if strings.Count(err.Error(), "nats: ") > 1 && !errors.Is(err, natsgo.ErrTimeout) {
			t.Errorf("%s: the error says nats: more than once: %v", what, err)
		}
	}
	dup := append(makeEvents(1, 10), evs[1])
	_, err := w.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Exact(2), Events: dup})
	check("duplicate id", err, varve.ErrDuplicateEvent)

	// A server that stops answering: every call fails at its timeout.
	p := newProxy(t, embeddedURL)
	rcfg := cfg
	rcfg.URL, rcfg.RequestTimeout = p.url(), 100*time.Millisecond
	r := open(t, rcfg)
	bg := context.Background() // the request timeout applies
	p.freezeAfter(0)
	_, err = r.Append(bg, varve.AppendRequest{Stream: stream, Expected: varve.Exact(2), Events: makeEvents(1, 10)})
	check("append", err, natsgo.ErrTimeout)
	_, err = r.ReadStream(bg, varve.StreamQuery{Stream: stream, Limit: 10}, nil)
	check("read", err, natsgo.ErrTimeout)
	_, err = r.StreamInfo(bg, stream)
	check("stream info", err, natsgo.ErrTimeout)
	check("truncate", r.Truncate(bg, stream, 2), natsgo.ErrTimeout)
	check("delete", r.Delete(bg, stream, varve.Any, false), natsgo.ErrTimeout)
	_, err = r.ReadAll(bg, varve.AllQuery{Limit: 10}, nil)
	check("read $all", err, natsgo.ErrTimeout)
	p.freezeAfter(-1)
}

// TestCloseWakesWatchers: a reader waiting on Watch wakes up when the
// backend closes.
func TestCloseWakesWatchers(t *testing.T) {
	b := open(t, testConfig(embeddedURL, uniqueName("watchclose")))
	ch := b.Watch()
	_ = b.Close()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("a watcher still waits after Close")
	}
	select {
	case <-b.Watch():
	default:
		t.Fatal("Watch after Close returns a channel that is not closed")
	}
}
