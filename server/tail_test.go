package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// listen serves h with NewHTTPServer's settings (adjusted by tune) on a
// loopback port, stopped when the test ends, and returns its base URL.
func listen(t testing.TB, h *server.Server, tune func(*http.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := server.NewHTTPServer(ln.Addr().String(), h, nil)
	if tune != nil {
		tune(hs)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	t.Cleanup(func() {
		h.Close() // ends the tails, so that Shutdown returns
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return "http://" + ln.Addr().String()
}

// TestTailLoad: 100 followers tail $all over loopback while 4 writers
// append; every follower gets every event of the run, once, in position
// order, the same sequence a reader of $all gets. VARVE_SSE_LOAD_EVENTS
// sets the number of appends (default 400, of 2 events each).
func TestTailLoad(t *testing.T) {
	const followers, writers = 100, 4
	appends := 400
	if v, err := strconv.Atoi(os.Getenv("VARVE_SSE_LOAD_EVENTS")); err == nil && v > 0 {
		appends = v
	}
	store := teststore.Kinds[1].Open(t, varve.Config{}) // SQLite, the embedded default
	if teststore.Kinds[1].Name != "sqlite" {
		t.Fatalf("Kinds[1] is %s", teststore.Kinds[1].Name)
	}
	srv, err := server.New(server.Config{Store: store, Token: token, Heartbeat: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{t: t, url: listen(t, srv, nil), log: &syncBuffer{}, seen: &syncBuffer{}}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	start, err := store.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Followers connect first and say when they are live.
	type result struct {
		positions []varve.Position
		err       error
	}
	results := make([]result, followers)
	live := make(chan struct{}, followers)
	lastCh := make(chan varve.Position)
	var wg sync.WaitGroup
	var stops []func()
	for i := range followers {
		events, stop, res := a.tail(ctx, "?after="+start.String())
		stops = append(stops, stop)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("follower %d: status %d", i, res.StatusCode)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			var last varve.Position
			end := varve.Position{}
			endKnown := false
			endC := lastCh
			for {
				if endKnown && !last.Less(end) {
					return
				}
				select {
				case p := <-endC:
					end, endKnown, endC = p, true, nil
					continue
				case ev, ok := <-events:
					if !ok {
						r.err = errors.New("the tail ended early")
						return
					}
					switch ev.typ {
					case "start":
						live <- struct{}{}
					case "event":
						var e struct {
							Position varve.Position `json:"position"`
						}
						if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
							r.err = err
							return
						}
						if !last.Less(e.Position) {
							r.err = fmt.Errorf("position %s after %s", e.Position, last)
							return
						}
						last = e.Position
						r.positions = append(r.positions, e.Position)
					}
				case <-ctx.Done():
					r.err = fmt.Errorf("timed out after %d events", len(r.positions))
					return
				}
			}
		}()
	}
	for range followers {
		select {
		case <-live:
		case <-ctx.Done():
			t.Fatal("the followers did not all start")
		}
	}

	var wwg sync.WaitGroup
	werrs := make(chan error, writers)
	for w := range writers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for i := range appends / writers {
				_, err := store.Append(ctx, fmt.Sprintf("load-%d", w), varve.Exact(varve.Version(2*i)),
					varve.NewEvent("A", []byte(`{"i":1}`)), varve.NewEvent("B", nil))
				if err != nil {
					werrs <- err
					return
				}
			}
		}()
	}
	wwg.Wait()
	close(werrs)
	for err := range werrs {
		t.Fatal(err)
	}
	var want []varve.Position
	for e, err := range store.ReadAll(ctx, start) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e.Position)
	}
	if len(want) != 2*(appends/writers)*writers {
		t.Fatalf("$all holds %d events of the run, %d were appended", len(want), 2*(appends/writers)*writers)
	}
	for range followers {
		lastCh <- want[len(want)-1]
	}
	wg.Wait()
	for _, stop := range stops {
		stop()
	}
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("follower %d: %v", i, r.err)
		}
		if len(r.positions) != len(want) {
			t.Fatalf("follower %d got %d events, $all holds %d", i, len(r.positions), len(want))
		}
		for j := range want {
			if r.positions[j] != want[j] {
				t.Fatalf("follower %d: event %d at %s, $all has %s", i, j, r.positions[j], want[j])
			}
		}
	}
	t.Logf("%d followers each got all %d events in order", followers, len(want))
}

// TestTailOutlivesServerTimeouts: a live tail lasts beyond a listener's
// read and write timeouts: each flush of the tail moves its own write
// deadline.
func TestTailOutlivesServerTimeouts(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	srv, err := server.New(server.Config{Store: store, Token: token, Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{t: t, url: listen(t, srv, func(hs *http.Server) { hs.ReadTimeout, hs.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond }), log: &syncBuffer{}, seen: &syncBuffer{}}
	events, stop, _ := a.tail(t.Context(), "")
	defer stop()
	next(t, events, "start", 10*time.Second)
	time.Sleep(600 * time.Millisecond) // three timeouts of each kind
	if _, err := store.Append(t.Context(), "late", varve.Any, varve.NewEvent("Late", nil)); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events, "event", 10*time.Second); !json.Valid([]byte(ev.data)) {
		t.Fatalf("event: %q", ev.data)
	}
}

// TestTailLimits: tails beyond MaxFollowers are refused with 503; Close
// ends the tails in flight and refuses new ones.
func TestTailLimits(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{MaxFollowers: 2})
	var stops []func()
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	var tails []<-chan sseEvent
	for range 2 {
		ev, stop, res := a.tail(t.Context(), "")
		stops = append(stops, stop)
		if res.StatusCode != 200 {
			t.Fatalf("tail: %d", res.StatusCode)
		}
		next(t, ev, "start", 10*time.Second)
		tails = append(tails, ev)
	}
	r := a.want(a.do("GET", "/api/v1/all/tail", nil), 503, "a third tail")
	if r.errCode() != "too_many_followers" {
		t.Fatalf("third tail: %s", r.raw)
	}
	a.srv.Close()
	for i, ev := range tails {
		select {
		case _, ok := <-ev:
			for ok {
				_, ok = <-ev
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("tail %d still open after Close", i)
		}
	}
	r = a.want(a.do("GET", "/api/v1/all/tail", nil), 503, "a tail after Close")
	if r.errCode() != "shutting_down" {
		t.Fatalf("tail after Close: %s", r.raw)
	}
}

// TestTailDropsStuckClient: a follower that stops reading is dropped once
// a write has waited RequestTimeout, and its place is free again.
func TestTailDropsStuckClient(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	srv, err := server.New(server.Config{Store: store, Token: token, MaxFollowers: 1, RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	base := listen(t, srv, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A client that asks for the tail and never reads a byte.
	fmt.Fprintf(conn, "GET /api/v1/all/tail?after=start HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token)
	a := &api{t: t, url: base, log: &syncBuffer{}, seen: &syncBuffer{}}
	deadline := time.Now().Add(30 * time.Second)
	for a.do("GET", "/api/v1/all/tail?after=x", nil).status != 400 { // the route answers: the server is up
		if time.Now().After(deadline) {
			t.Fatal("the server does not answer")
		}
	}
	// More than the socket buffers hold.
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	data := []byte(`"` + string(big) + `"`)
	for i := range 400 {
		if _, err := store.Append(t.Context(), fmt.Sprintf("big-%d", i%10), varve.Any, varve.Event{Type: "Big", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, stop, res := a.tail(ctx, "?after=end")
		stop()
		cancel()
		if res.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stuck follower still holds the only place: %d", res.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
