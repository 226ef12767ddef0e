package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/varve-go/varve"
)

// countingProxy forwards loopback TCP connections to target and counts the
// reads of the client side: a client that waits for each reply before it
// sends again writes once per round trip, so the count is its round trips
// (plus whatever else the pool's other connections send meanwhile).
type countingProxy struct {
	ln     net.Listener
	target string
	reads  atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *countingProxy) accept() {
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
		p.wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
		p.wg.Go(func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					p.reads.Add(1)
					if _, werr := s.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = s.Close()
		})
	}
}

// TestRoundTrips proves that a point read (a page of a stream, StreamInfo,
// LastPosition) and a filtered page of $all, with its through, are one
// round trip each once the statement is prepared: the
// fewest client writes seen over several calls is 1 (other traffic of the
// pool only adds to a call's count, never takes from it).
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	cfg := config(t, testSchema+"_rt")
	u, err := url.Parse(cfg.ConnString)
	if err != nil || u.Host == "" {
		t.Fatalf("connection string %q is not a URL with a host: %v", cfg.ConnString, err)
	}
	p := newCountingProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	cfg.ConnString = u.String()
	cfg.MaxConns = 1
	cfg.NoNotify = true
	be := open(t, cfg)
	s, err := varve.New(be, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	stream := fmt.Sprintf("rt-%d", benchRun.Add(1))
	evs := benchEvents(10)
	freshIDs(evs)
	res, err := s.Append(ctx, stream, varve.NoStream, evs...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, res.Position); err != nil {
		t.Fatal(err)
	}
	buf := make([]varve.RecordedEvent, 0, 10)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"ReadStream of 10", func() error {
			var err error
			buf, err = be.ReadStream(ctx, varve.StreamQuery{Stream: stream, From: 1, Limit: 10}, buf[:0])
			if err == nil && len(buf) != 10 {
				err = fmt.Errorf("read %d events, want 10", len(buf))
			}
			return err
		}},
		{"StreamInfo", func() error {
			info, err := be.StreamInfo(ctx, stream)
			if err == nil && info.Version != 10 {
				err = fmt.Errorf("version %d, want 10", info.Version)
			}
			return err
		}},
		{"LastPosition", func() error {
			pos, err := be.LastPosition(ctx)
			if err == nil && pos.IsZero() {
				err = errors.New("no last position")
			}
			return err
		}},
		{"a filtered page of $all", func() error {
			var through varve.Position
			var err error
			buf, through, err = be.ReadAllFiltered(ctx, varve.FilterQuery{Limit: 10, Filter: varve.Filter{Categories: []string{"rt"}, StreamPrefixes: []string{stream}}}, buf[:0])
			if err == nil && (len(buf) != 10 || through.Less(res.Position)) {
				err = fmt.Errorf("read %d events through %s, want 10 through %s", len(buf), through, res.Position)
			}
			return err
		}},
		{"an empty filtered page", func() error {
			var through varve.Position
			var err error
			buf, through, err = be.ReadAllFiltered(ctx, varve.FilterQuery{After: res.Position, Limit: 10, Filter: varve.Filter{StreamPrefixes: []string{stream}}}, buf[:0])
			if err == nil && (len(buf) != 0 || through.Less(res.Position)) {
				err = fmt.Errorf("read %d events through %s, want none through %s", len(buf), through, res.Position)
			}
			return err
		}},
		{"StreamInfo of a missing stream", func() error {
			_, err := be.StreamInfo(ctx, stream+"-missing")
			if !errors.Is(err, varve.ErrStreamNotFound) {
				return fmt.Errorf("got %v, want ErrStreamNotFound", err)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err != nil { // prepares the statement
				t.Fatal(err)
			}
			fewest := int64(1 << 62)
			for range 20 {
				before := p.reads.Load()
				if err := tc.call(); err != nil {
					t.Fatal(err)
				}
				fewest = min(fewest, p.reads.Load()-before)
			}
			if fewest != 1 {
				t.Fatalf("fewest round trips of a call: %d, want 1", fewest)
			}
		})
	}
}
