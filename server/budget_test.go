package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// heapObjects is the heap the runtime counts in objects, live or not yet
// swept.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// matchCounter counts the occurrences of pat in what is written to it,
// also across writes, without keeping what it counted; it keeps the last
// tailLen bytes.
type matchCounter struct {
	pat   []byte
	carry []byte
	n     int
	tail  []byte
}

const tailLen = 512

func (c *matchCounter) Write(p []byte) (int, error) {
	if len(c.carry) > 0 {
		joined := append(c.carry, p[:min(len(p), len(c.pat)-1)]...)
		c.n += bytes.Count(joined, c.pat)
	}
	c.n += bytes.Count(p, c.pat)
	keep := func(b []byte, src []byte, n int) []byte {
		b = append(b, src...)
		if len(b) > n {
			b = append(b[:0], b[len(b)-n:]...)
		}
		return b
	}
	if len(p) >= len(c.pat)-1 {
		c.carry = append(c.carry[:0], p[len(p)-(len(c.pat)-1):]...)
	} else {
		c.carry = keep(c.carry, p, len(c.pat)-1)
	}
	if len(p) >= tailLen {
		c.tail = append(c.tail[:0], p[len(p)-tailLen:]...)
	} else {
		c.tail = keep(c.tail, p, tailLen)
	}
	return len(p), nil
}

// pageEnd decodes what follows the events of a page of the API: the
// members of its object after the "events" array.
func pageEnd(tail []byte) (map[string]any, error) {
	i := bytes.LastIndexByte(tail, ']')
	if i < 0 {
		return nil, fmt.Errorf("no end of the events in %q", tail)
	}
	rest := bytes.TrimLeft(tail[i+1:], " \n")
	var m map[string]any
	if bytes.HasPrefix(rest, []byte("}")) {
		return map[string]any{}, nil
	}
	if err := json.Unmarshal(append([]byte("{"), bytes.TrimPrefix(rest, []byte(","))...), &m); err != nil {
		return nil, fmt.Errorf("the members after the events: %v in %q", err, rest)
	}
	return m, nil
}

// streamBody reads a response body in pieces through a counter of pat;
// slow readers read smaller pieces.
func streamBody(ctx context.Context, url string, pat string, slow bool) (*matchCounter, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return nil, fmt.Errorf("GET %s: status %d: %s", url, res.StatusCode, b)
	}
	c := &matchCounter{pat: []byte(pat)}
	_, err = io.CopyBuffer(c, struct{ io.Reader }{res.Body}, readBuffer(slow))
	return c, err
}

// TestHeapBoundedByBytes: with 1 MiB events in the store, many concurrent
// readers of stream pages (limit=1000), of $all pages and of live tails
// from the start, each reading every event, keep the server's heap within
// the bound the package documents for its byte budgets (MaxPageBytes per
// page, MaxReadBytes for all responses at once), and every reader gets
// every event. On SQLite, whose reads allocate the events they return, as
// a server's would (the memory backend hands out the bytes it keeps). The
// stored events are not in the Go heap, so the baseline is taken after
// storing them.
func TestHeapBoundedByBytes(t *testing.T) {
	const (
		streams      = 3
		perStream    = 4
		total        = streams * perStream
		eventSize    = 1 << 20
		pageBytes    = 2 << 20
		readBytes    = 8 << 20
		pagers       = 8 // of streams
		allPagers    = 3 // of $all
		tails        = 4
		connOverhead = 64 << 10 // buffers of a connection, both ends
	)
	// The documented bound of the responses' heap, twice for the garbage
	// the collector lets grow (GOGC=100), plus the connections and the
	// test's own allocations.
	bound := uint64(2*4*readBytes + (pagers+allPagers+tails)*connOverhead + 8<<20)

	defer debug.SetGCPercent(debug.SetGCPercent(100)) // the bound's factor 2, whatever GOGC says
	store := teststore.Kinds[1].Open(t, varve.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	data := bytes.Repeat([]byte{0xff, 0x00, 0x7f, 0x80}, eventSize/4) // not JSON: base64 in the API
	for i := range total {
		if _, err := store.Append(ctx, fmt.Sprintf("big-%d", i%streams), varve.Any, varve.Event{Type: "Big", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	data = nil
	t.Logf("stored %d events of %d bytes in %v", total, eventSize, time.Since(began))
	srv, err := server.New(server.Config{Store: store, Token: token, MaxPageBytes: pageBytes, MaxReadBytes: readBytes})
	if err != nil {
		t.Fatal(err)
	}
	base := listen(t, srv, nil)

	runtime.GC()
	runtime.GC()
	baseline := heapObjects()
	began = time.Now()
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var peak uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if h := heapObjects(); h > peak {
				if peak = h; peak-min(peak, baseline) > 4*bound {
					stopLoad() // far over: no need to go further
				}
			}
			select {
			case <-load.Done():
				return
			case <-tick.C:
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, pagers+allPagers+tails)
	run := func(f func() error) {
		wg.Go(func() {
			if err := f(); err != nil {
				errs <- err
			}
		})
	}
	for i := range pagers {
		stream := fmt.Sprintf("big-%d", i%streams)
		run(func() error {
			got, from := 0, ""
			for {
				u := base + "/api/v1/streams/" + stream + "/events?limit=1000" + from
				c, err := streamBody(load, u, `"position":`, i%2 == 1)
				if err != nil {
					return err
				}
				got += c.n
				end, err := pageEnd(c.tail)
				if err != nil {
					return err
				}
				next, ok := end["next"].(float64)
				if !ok {
					break
				}
				from = fmt.Sprintf("&from=%d", int(next))
			}
			if got != perStream {
				return fmt.Errorf("stream pager %d read %d events of %s, it holds %d", i, got, stream, perStream)
			}
			return nil
		})
	}
	for i := range allPagers {
		run(func() error {
			got, after := 0, "start"
			for {
				c, err := streamBody(load, base+"/api/v1/all?limit=1000&after="+url.QueryEscape(after), `"position":`, i%2 == 1)
				if err != nil {
					return err
				}
				got += c.n
				end, err := pageEnd(c.tail)
				if err != nil {
					return err
				}
				if end["more"] != true {
					break
				}
				after = end["through"].(string)
			}
			if got != total {
				return fmt.Errorf("$all pager %d read %d events, the store holds %d", i, got, total)
			}
			return nil
		})
	}
	for i := range tails {
		run(func() error {
			tctx, cancel := context.WithCancel(load)
			defer cancel()
			c := &sseCounter{want: total, done: cancel}
			_, err := streamSSE(tctx, base+"/api/v1/all/tail?after=start", c, i%2 == 1)
			if c.events != total {
				return fmt.Errorf("tail %d got %d events, the store holds %d (%v)", i, c.events, total, err)
			}
			return c.err
		})
	}
	wg.Wait()
	stopLoad()
	<-sampled
	close(errs)
	t.Logf("the load took %v", time.Since(began))
	grew := peak - min(peak, baseline)
	t.Logf("heap: baseline %.1f MiB, peak %.1f MiB, growth %.1f MiB, bound %.1f MiB",
		mib(baseline), mib(peak), mib(grew), mib(bound))
	if grew > bound {
		t.Fatalf("the heap grew by %.1f MiB under the load, over the bound of %.1f MiB", mib(grew), mib(bound))
	}
	for err := range errs {
		t.Error(err)
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// sseCounter follows server-sent events as they are written to it: it
// counts "event" events and checks that their ids (positions) increase,
// keeping only the start of each line.
type sseCounter struct {
	want   int
	done   func() // called once want events came
	line   []byte
	events int
	last   varve.Position
	err    error
}

func (c *sseCounter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		if room := 64 - len(c.line); room > 0 {
			c.line = append(c.line, part[:min(room, len(part))]...)
		}
		if i < 0 {
			break
		}
		c.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (c *sseCounter) endLine() {
	line := string(c.line)
	c.line = c.line[:0]
	switch {
	case strings.HasPrefix(line, "id: "):
		pos, err := varve.ParsePosition(line[4:])
		if err == nil && !c.last.Less(pos) {
			err = fmt.Errorf("position %s after %s", pos, c.last)
		}
		if err != nil && c.err == nil {
			c.err = err
		}
		c.last = pos
	case line == "event: event":
		if c.events++; c.events == c.want {
			c.done()
		}
	case line == "event: error" && c.err == nil:
		c.err = errors.New("the tail sent an error")
	}
}

// streamSSE reads a live tail into w in small pieces until ctx ends.
func streamSSE(ctx context.Context, url string, w io.Writer, slow bool) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("tail: status %d", res.StatusCode)
	}
	return io.CopyBuffer(w, struct{ io.Reader }{res.Body}, readBuffer(slow))
}

// readBuffer is the buffer a test client reads a response with: a slow
// one reads in pieces of 1 KiB.
func readBuffer(slow bool) []byte {
	if slow {
		return make([]byte, 1<<10)
	}
	return make([]byte, 16<<10)
}

// TestPagesByBytes: events of up to 256 KiB force short pages under
// MaxPageBytes (one event alone when it is over it), and a client that
// pages on with next (a stream, both directions) or through ($all) until
// "more" is false, or follows the live tail, gets every event exactly once,
// in order, with its data, on every page within MaxPageBytes plus one event;
// a consumer's lag counts them all through pages of subscription.LagPageBytes.
func TestPagesByBytes(t *testing.T) {
	const pageBytes = 64 << 10
	sizes := []int{0, 10, 25 << 10, 50 << 10, 256 << 10, 5, 75 << 10, 63 << 10, 1 << 10, 200 << 10, 16 << 10, 16 << 10, 16 << 10, 16 << 10, 16 << 10, 3}
	for _, k := range teststore.Kinds[:2] {
		t.Run(k.Name, func(t *testing.T) {
			store := k.Open(t, varve.Config{})
			ctx := t.Context()
			var stored []varve.Event
			for i, n := range sizes {
				e := varve.Event{Type: "Sized", Data: bytes.Repeat([]byte{byte(0x80 + i)}, n)}
				if i%3 == 0 && n >= 2 { // JSON: a string
					e.Data = append(append([]byte(`"`), bytes.Repeat([]byte("<a&"), (n-2)/3)...), '"')
				}
				if i%4 == 1 {
					e.Metadata = []byte(`{"k":"v"}`)
				}
				stored = append(stored, e)
				if _, err := store.Append(ctx, "sized", varve.Exact(varve.Version(i)), e); err != nil {
					t.Fatal(err)
				}
			}
			a := serve(t, store, server.Config{MaxPageBytes: pageBytes})
			maxEvent := store.Config().MaxEventSize

			type page struct {
				events []server.Event
				next   *varve.Version
				more   bool
			}
			// check checks that a page ends at the event that takes it to
			// pageBytes, or at its limit, or at the end.
			check := func(what string, limit int, p page) {
				t.Helper()
				n := 0
				for i, e := range p.events {
					n += len(eventData(t, e)) + len(e.Metadata) + len(e.MetadataBase64)
					if i < len(p.events)-1 && n >= pageBytes {
						t.Fatalf("%s: the page goes on after event %d took it to %d bytes", what, i, n)
					}
				}
				if n > pageBytes+maxEvent {
					t.Fatalf("%s: %d bytes of events, over %d plus an event", what, n, pageBytes)
				}
				if p.more && n < pageBytes && len(p.events) < limit {
					t.Fatalf("%s: more with %d events of %d bytes", what, len(p.events), n)
				}
			}
			get := func(path string) (page, []byte) {
				t.Helper()
				r := a.want(a.do("GET", path, nil), 200, path)
				var p struct {
					Events  []server.Event  `json:"events"`
					Next    json.RawMessage `json:"next"` // a stream's version, $all's position
					More    bool            `json:"more"`
					Through string          `json:"through"`
				}
				if err := json.Unmarshal(r.raw, &p); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				var next *varve.Version
				if strings.HasPrefix(path, "/api/v1/streams/") {
					if err := json.Unmarshal(p.Next, &next); err != nil {
						t.Fatalf("%s: next %s: %v", path, p.Next, err)
					}
				}
				return page{p.Events, next, p.More}, r.raw
			}

			tests := []struct {
				name     string
				limit    int
				first    string
				next     func(p page, raw []byte) string
				versions []varve.Version
			}{
				{"stream forward", 1000, "/api/v1/streams/sized/events?limit=1000", func(p page, _ []byte) string {
					if p.next == nil {
						return ""
					}
					return fmt.Sprintf("/api/v1/streams/sized/events?limit=1000&from=%d", *p.next)
				}, versions(1, len(sizes))},
				{"stream backward", 1000, "/api/v1/streams/sized/events?limit=1000&direction=backward", func(p page, _ []byte) string {
					if p.next == nil {
						return ""
					}
					return fmt.Sprintf("/api/v1/streams/sized/events?limit=1000&direction=backward&from=%d", *p.next)
				}, versions(len(sizes), 1)},
				{"stream forward, limit 3", 3, "/api/v1/streams/sized/events?limit=3", func(p page, _ []byte) string {
					if p.next == nil {
						return ""
					}
					return fmt.Sprintf("/api/v1/streams/sized/events?limit=3&from=%d", *p.next)
				}, versions(1, len(sizes))},
				{"$all", 1000, "/api/v1/all?limit=1000&after=start", func(p page, raw []byte) string {
					var th struct {
						Through string `json:"through"`
					}
					_ = json.Unmarshal(raw, &th)
					if !p.more {
						return ""
					}
					return "/api/v1/all?limit=1000&after=" + url.QueryEscape(th.Through)
				}, versions(1, len(sizes))},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					var got []server.Event
					pages := 0
					for path := tc.first; path != ""; pages++ {
						p, raw := get(path)
						check(path, tc.limit, p)
						got = append(got, p.events...)
						path = tc.next(p, raw)
						if pages > 2*len(sizes) {
							t.Fatal("the pages do not end")
						}
					}
					checkEvents(t, got, tc.versions, stored)
					t.Logf("%d events in %d pages", len(got), pages)
				})
			}
			t.Run("lag", func(t *testing.T) {
				// subscription.Lag reads pages of LagPageBytes: events over it make
				// pages of one, and the count reads on past them.
				if err := store.Checkpoints().Save(ctx, "from-start", varve.Start); err != nil {
					t.Fatal(err)
				}
				r := a.want(a.do("GET", "/api/v1/subscriptions/from-start", nil), 200, "a consumer's lag")
				if s := r.body["subscription"].(map[string]any); s["lag"] != float64(len(sizes)) || s["lag_more"] != false {
					t.Fatalf("lag of a consumer at the start: %v (more %v), the log holds %d events", s["lag"], s["lag_more"], len(sizes))
				}
			})
			t.Run("tail", func(t *testing.T) {
				events, stop, _ := a.tail(ctx, "?after=start")
				defer stop()
				var got []server.Event
				for len(got) < len(sizes) {
					ev := next(t, events, "event", 60*time.Second)
					var e server.Event
					if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
						t.Fatal(err)
					}
					if ev.id != e.Position.String() {
						t.Fatalf("event id %s, position %s", ev.id, e.Position)
					}
					got = append(got, e)
				}
				checkEvents(t, got, versions(1, len(sizes)), stored)
			})
		})
	}
}

// versions returns the versions from a to b, both included, in that order.
func versions(a, b int) []varve.Version {
	var out []varve.Version
	for v := a; ; {
		out = append(out, varve.Version(v))
		if v == b {
			return out
		}
		if a < b {
			v++
		} else {
			v--
		}
	}
}

func eventData(t *testing.T, e server.Event) []byte {
	t.Helper()
	if e.Data != nil {
		var s string
		if err := json.Unmarshal(e.Data, &s); err != nil {
			t.Fatalf("event %d: data %.40s: %v", e.Version, e.Data, err)
		}
		return []byte(`"` + s + `"`)
	}
	return e.DataBase64
}

// checkEvents checks that got are the events of the versions, in that
// order, each once, with the data and metadata they were stored with.
func checkEvents(t *testing.T, got []server.Event, want []varve.Version, stored []varve.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i, e := range got {
		if e.Version != want[i] {
			t.Fatalf("event %d is version %d, want %d", i, e.Version, want[i])
		}
		s := stored[e.Version-1]
		if d := eventData(t, e); !bytes.Equal(d, s.Data) && !(len(d) == 0 && len(s.Data) == 0) {
			t.Fatalf("version %d: data of %d bytes differs from the %d stored", e.Version, len(d), len(s.Data))
		}
		if m := string(e.Metadata); m != string(s.Metadata) {
			t.Fatalf("version %d: metadata %q, stored %q", e.Version, m, s.Metadata)
		}
	}
}

// readCounter counts the stream reads that reach the backend.
type readCounter struct {
	varve.Backend
	mu    sync.Mutex
	reads int
}

func (c *readCounter) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Backend.ReadStream(ctx, q, buf)
}

// TestStreamPageOneRead: a stream page of more events than the store's
// page size is one backend read, within the page's share of the budget (a
// second read would take a byte budget of its own).
func TestStreamPageOneRead(t *testing.T) {
	b := &readCounter{Backend: memory.New()}
	store, err := varve.New(b, varve.Config{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for range 30 {
		if _, err := store.Append(context.Background(), "s-1", varve.Any, varve.NewEvent("E", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	a := serve(t, store, server.Config{})
	b.mu.Lock()
	b.reads = 0
	b.mu.Unlock()
	r := a.do("GET", "/api/v1/streams/s-1/events?limit=25", nil)
	if r.status != http.StatusOK || len(r.body["events"].([]any)) != 25 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reads != 1 {
		t.Fatalf("a page of 25 events took %d backend reads", b.reads)
	}
}
