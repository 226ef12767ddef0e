package jsclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/varve-go/varve/internal/testenv"
)

var embeddedURL string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jsclient-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := startServer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	embeddedURL = s.ClientURL()
	code := m.Run()
	s.Shutdown()
	s.WaitForShutdown()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func startServer(dir string) (*server.Server, error) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	if err != nil {
		return nil, err
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("in-process nats-server did not start")
	}
	return s, nil
}

// mode is a server and whether the client reads with consumers.
type mode struct {
	name      string
	url       func(*testing.T) string
	consumers bool
}

var modes = []mode{
	{"machine", func(t *testing.T) string { return testenv.NATSURL(t) }, true},
	{"embedded", func(*testing.T) string { return embeddedURL }, false},
	{"embedded-consumers", func(*testing.T) string { return embeddedURL }, true},
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// setup connects, creates a memory stream of its own with subjects
// <prefix>.>, deleted at the end, and returns a client of it.
func setup(t *testing.T, md mode) (*Client, *nats.Conn, jetstream.JetStream, string) {
	t.Helper()
	nc, err := nats.Connect(md.url(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "T_jsclient_" + hex.EncodeToString(b[:])
	prefix := "tj" + hex.EncodeToString(b[:])
	if _, err := js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	c, err := New(nc, Config{Stream: name, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(time.Second) })
	if md.consumers {
		c.DisableBatchGets()
	}
	return c, nc, js, prefix
}

// TestCursorNeverPassesOver purges one subject of a stream below most of
// its messages while a cursor over all subjects is half way: servers before
// 2.11 move the cursor's consumer past the live messages of the other
// subject. The cursor must return every message of the subject that was
// not purged, once and in order, and the purged subject's messages from
// the purge on.
func TestCursorNeverPassesOver(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			c, _, _, prefix := setup(t, md)
			const n = 2000
			for i := range n {
				subj := prefix + ".e.a"
				if i%2 == 1 {
					subj = prefix + ".e.b"
				}
				if _, err := c.Publish(ctxT(t), subj, []byte(strconv.Itoa(i)), Expect{}); err != nil {
					t.Fatal(err)
				}
			}
			k := c.Cursor(prefix+".e.>", 1, 20)
			defer k.Release()
			var got []uint64
			next := func() bool {
				m, ok, err := k.Next(ctxT(t), 0)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					got = append(got, m.Seq)
				}
				return ok
			}
			for range 10 {
				next()
			}
			// Purge subject a below 1801: its messages 1..1799 go.
			if err := c.Purge(ctxT(t), prefix+".e.a", 1801); err != nil {
				t.Fatal(err)
			}
			// More messages after the purge: a consumer that was moved
			// delivers them after a jump.
			for i := n; i < n+10; i++ {
				if _, err := c.Publish(ctxT(t), prefix+".e.b", []byte(strconv.Itoa(i)), Expect{}); err != nil {
					t.Fatal(err)
				}
			}
			for next() {
			}
			// Every message of b, and of a from the purge on, exactly
			// once and in order; messages of a that the purge removed may
			// come (if the cursor had them before) or not.
			seen := map[uint64]bool{}
			for i, seq := range got {
				if i > 0 && seq <= got[i-1] {
					t.Fatalf("sequence %d after %d", seq, got[i-1])
				}
				seen[seq] = true
			}
			missing := 0
			for seq := uint64(1); seq <= n+10; seq++ {
				if (seq%2 == 0 || seq >= 1801) && !seen[seq] {
					missing++
				}
			}
			if missing > 0 {
				t.Fatalf("%d live messages never returned (passed over and read again: %d, consumers replaced: %d)", missing, c.PassedOver(), c.Restarts())
			}
			t.Logf("%d messages in order; passed over and read again: %d, consumers replaced: %d", len(got), c.PassedOver(), c.Restarts())
		})
	}
}

// TestSparseCursorNeverPassesOver reads a sparse filter like a category's,
// <prefix>.e.*, whose every message follows a jump in sequence (a third of
// the messages are on a subject outside it); a purge of one of its
// subjects half way moves the consumer on servers before 2.11. The cursor
// returns every live message once, in order.
func TestSparseCursorNeverPassesOver(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			c, _, _, prefix := setup(t, md)
			const n = 3000
			subj := func(i int) string { return prefix + [...]string{".e.a", ".e.b", ".o"}[i%3] }
			for i := range n {
				if _, err := c.Publish(ctxT(t), subj(i), []byte(strconv.Itoa(i)), Expect{}); err != nil {
					t.Fatal(err)
				}
			}
			k := c.Cursor(prefix+".e.*", 1, 20)
			defer k.Release()
			var got []uint64
			next := func() bool {
				m, ok, err := k.Next(ctxT(t), 0)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					got = append(got, m.Seq)
				}
				return ok
			}
			for range 40 {
				next()
			}
			// Purge subject a (sequences 1, 4, 7, ...) below 2701.
			if err := c.Purge(ctxT(t), prefix+".e.a", 2701); err != nil {
				t.Fatal(err)
			}
			for i := n; i < n+30; i++ {
				if _, err := c.Publish(ctxT(t), subj(i), []byte(strconv.Itoa(i)), Expect{}); err != nil {
					t.Fatal(err)
				}
			}
			for next() {
			}
			seen := map[uint64]bool{}
			for i, seq := range got {
				if i > 0 && seq <= got[i-1] {
					t.Fatalf("sequence %d after %d", seq, got[i-1])
				}
				seen[seq] = true
			}
			missing := 0
			for seq := uint64(1); seq <= n+30; seq++ {
				switch (seq - 1) % 3 {
				case 0: // a
					if seq >= 2701 && !seen[seq] {
						missing++
					}
				case 1: // b
					if !seen[seq] {
						missing++
					}
				default:
					if seen[seq] {
						t.Fatalf("message %d is outside the filter", seq)
					}
				}
			}
			if missing > 0 {
				t.Fatalf("%d live messages never returned (passed over and read again: %d)", missing, c.PassedOver())
			}
			t.Logf("%d messages in order; passed over and read again: %d", len(got), c.PassedOver())
		})
	}
}

// TestCursorAcrossCalls: a cursor that caught up returns the messages
// stored after, in later calls, and one with an end stops there.
func TestCursorAcrossCalls(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			c, _, _, prefix := setup(t, md)
			pub := func(from, to int) {
				for i := from; i < to; i++ {
					if _, err := c.Publish(ctxT(t), prefix+".e.x"+strconv.Itoa(i%3), nil, Expect{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			drain := func(k *Cursor, end uint64) []uint64 {
				var seqs []uint64
				for {
					m, ok, err := k.Next(ctxT(t), end)
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						return seqs
					}
					seqs = append(seqs, m.Seq)
				}
			}
			k := c.Cursor(prefix+".e.>", 1, 4)
			defer k.Release()
			if got := drain(k, 0); len(got) != 0 {
				t.Fatalf("empty stream: %v", got)
			}
			pub(0, 5)
			if got := drain(k, 0); fmt.Sprint(got) != "[1 2 3 4 5]" {
				t.Fatalf("after 5 publishes: %v", got)
			}
			pub(5, 12)
			if got := drain(k, 9); fmt.Sprint(got) != "[6 7 8 9]" {
				t.Fatalf("up to 9: %v", got)
			}
			if got := drain(k, 0); fmt.Sprint(got) != "[10 11 12]" {
				t.Fatalf("the rest: %v", got)
			}
			if k.Pos() != 13 {
				t.Fatalf("position %d, want 13", k.Pos())
			}
		})
	}
}

// TestCloseInterrupts: Close makes a call that waits return ErrClosed at
// once, and deletes the consumers of open cursors.
func TestCloseInterrupts(t *testing.T) {
	c, _, js, prefix := setup(t, modes[2])
	if _, err := c.Publish(ctxT(t), prefix+".e.a", nil, Expect{}); err != nil {
		t.Fatal(err)
	}
	k := c.Cursor(prefix+".e.>", 1, 4)
	if _, ok, err := k.Next(ctxT(t), 0); !ok || err != nil {
		t.Fatalf("first message: %v %v", ok, err)
	}
	// Waits for a message up to sequence 100, which never comes.
	done := make(chan error, 1)
	go func() {
		_, _, err := k.Next(context.Background(), 100)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.Close(time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("wait after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a wait did not end with Close")
	}
	// Close waits up to its argument for the deletes; a loaded server may
	// answer later, but well before the inactivity threshold (30 s) would
	// remove a consumer that Close forgot.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := js.Stream(ctxT(t), c.stream)
		if err != nil {
			t.Fatal(err)
		}
		n := s.CachedInfo().State.Consumers
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers 10 s after Close", n)
		}
	}
	if _, _, err := c.Get(ctxT(t), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after Close: %v", err)
	}
}

// TestUnreachable: with the server down, a request fails at once with
// ErrUnreachable, and one that waits when the server goes away fails
// with it too.
func TestUnreachable(t *testing.T) {
	dir := t.TempDir()
	srv, err := startServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := New(nc, Config{Stream: "NONE", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(0)
	// A request to a subject whose subscriber never answers waits; the
	// server goes away.
	silent, err := nc.SubscribeSync("silent")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.request(context.Background(), &nats.Msg{Subject: "silent"})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	srv.Shutdown()
	srv.WaitForShutdown()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("request in flight: %v, want ErrUnreachable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a request in flight did not end when the server went away")
	}
	if _, err := c.Publish(context.Background(), "x", nil, Expect{}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("publish while the server is down: %v, want ErrUnreachable", err)
	}
}

func TestIsWrongLastSequence(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&APIError{Code: 400, ErrCode: 10071, Description: "wrong last sequence: 7"}, true},
		{fmt.Errorf("publish: %w", &APIError{Code: 400, ErrCode: 10164, Description: "wrong last sequence"}), true},
		{&APIError{Code: 503, ErrCode: 10008, Description: "jetstream temporarily unavailable"}, false},
		{errors.New("wrong last sequence"), false},
		{nil, false},
	}
	for _, c := range cases {
		if got := IsWrongLastSequence(c.err); got != c.want {
			t.Errorf("IsWrongLastSequence(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
