package server_test

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestReportFiles: only regular files of the reports directory are sent. A
// FIFO is refused without opening it (an open would block until a writer
// comes), a symbolic link out of the directory is not followed, and a name
// with a NUL is bad input; none of the answers carries an OS error.
func TestReportFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "good.html"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.html"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd.html")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("good.html", filepath.Join(dir, "alias.html")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "dangling.html")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "folder.html"), 0o755); err != nil {
		t.Fatal(err)
	}
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{Reports: os.DirFS(dir)})
	// Should a request open the FIFO, a writer ends its wait, so that the
	// server can stop.
	t.Cleanup(func() {
		if fd, err := syscall.Open(filepath.Join(dir, "pipe.html"), syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = syscall.Close(fd)
		}
	})

	for _, c := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"a report", "good.html", 200, ""},
		{"a FIFO", "pipe.html", 404, "no_such_report"},
		{"a symlink out of the directory", "passwd.html", 404, "no_such_report"},
		{"a symlink inside the directory", "alias.html", 404, "no_such_report"},
		{"a dangling symlink", "dangling.html", 404, "no_such_report"},
		{"a directory", "folder.html", 404, "no_such_report"},
		{"a name with a NUL", "a%00b.html", 400, "invalid_argument"},
		{"a name with a control character", "a%01b.html", 400, "invalid_argument"},
		{"a name that is not UTF-8", "a%FFb.html", 400, "invalid_argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a.t = t
			r := a.want(a.do("GET", "/api/v1/reports/"+c.path, nil), c.status, c.name)
			if c.status == 200 {
				if !strings.Contains(string(r.raw), `<h1 id="report-title">`) {
					t.Fatalf("the report: %.200s", r.raw)
				}
				return
			}
			if r.errCode() != c.code {
				t.Fatalf("code %q, want %q: %s", r.errCode(), c.code, r.raw)
			}
			for _, leak := range []string{"root:", dir, "/etc/passwd", "open ", "lstat", "stat ", "invalid argument"} {
				if strings.Contains(string(r.raw), leak) {
					t.Fatalf("the answer shows %q: %s", leak, r.raw)
				}
			}
		})
	}
	a.t = t
	list := a.want(a.do("GET", "/api/v1/reports", nil), 200, "the list")
	if got := fmt.Sprint(list.body["reports"]); !strings.Contains(got, "good.html") || strings.Count(got, "name:") != 1 {
		t.Fatalf("the list shows %s", list.raw)
	}
}

// TestInvalidUTF8: JSON data that is not UTF-8 is refused at the append,
// naming the field; such data stored through the library is served as
// base64, so that every answer is UTF-8.
func TestInvalidUTF8(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{Writes: true})
	bad := "\"caf\xe9\"" // a JSON string holding a Latin-1 byte
	for _, c := range []struct{ name, body, field string }{
		{"data", `{"expected_version":"any","events":[{"type":"T","data":` + bad + `}]}`, "events[0].data"},
		{"data in an object", `{"expected_version":"any","events":[{"type":"T","data":{"k":` + bad + `}}]}`, "events[0].data"},
		{"metadata", `{"expected_version":"any","events":[{"type":"T"},{"type":"T","metadata":[` + bad + `]}]}`, "events[1].metadata"},
	} {
		r := a.want(a.do("POST", "/api/v1/streams/utf8/events", c.body), 400, c.name)
		if !strings.Contains(r.errMessage(), c.field) || !strings.Contains(r.errMessage(), "UTF-8") {
			t.Errorf("%s: the message %q does not name %s and UTF-8", c.name, r.errMessage(), c.field)
		}
		if !utf8.Valid(r.raw) {
			t.Errorf("%s: the answer is not UTF-8: %q", c.name, r.raw)
		}
	}
	if _, err := store.StreamInfo(t.Context(), "utf8"); !errors.Is(err, varve.ErrStreamNotFound) {
		t.Fatalf("a refused append wrote: %v", err)
	}

	data, meta := []byte(`{"name":"caf`+"\xe9"+`"}`), []byte(`["`+"\xff\xfe"+`"]`)
	if _, err := store.Append(t.Context(), "latin1", varve.NoStream, varve.Event{Type: "T", Data: data, Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v1/streams/latin1/events", "/api/v1/all"} {
		r := a.want(a.do("GET", path, nil), 200, path)
		if !utf8.Valid(r.raw) {
			t.Fatalf("%s: the answer is not UTF-8: %q", path, r.raw)
		}
		evs := r.body["events"].([]any)
		e := evs[len(evs)-1].(map[string]any)
		if e["data"] != nil || e["data_base64"] != base64.StdEncoding.EncodeToString(data) ||
			e["metadata"] != nil || e["metadata_base64"] != base64.StdEncoding.EncodeToString(meta) {
			t.Fatalf("%s: the event is served as %v", path, e)
		}
	}
}

// TestHSTS: an answer over TLS tells the browser to keep to HTTPS; one over
// plain HTTP does not (the header means nothing there).
func TestHSTS(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	srv, err := server.New(server.Config{Store: store, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, c := range []struct {
		name string
		ts   *httptest.Server
		want string
	}{
		{"TLS", httptest.NewTLSServer(srv), "max-age=63072000"},
		{"plain HTTP", httptest.NewServer(srv), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.ts.Close()
			for _, path := range []string{"/api/v1/health", "/api/v1/info", "/", "/api/v1/nothing"} {
				res, err := c.ts.Client().Get(c.ts.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				_ = res.Body.Close()
				if got := res.Header.Get("Strict-Transport-Security"); got != c.want {
					t.Errorf("%s (%d): Strict-Transport-Security %q, want %q", path, res.StatusCode, got, c.want)
				}
			}
		})
	}
}

// TestAllowedMethods: OPTIONS answers 204 with every method a path takes,
// and a 405 carries the same list.
func TestAllowedMethods(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{})
	for _, c := range []struct{ path, allow, refused string }{
		{"/api/v1/streams/order-1/events", "GET, HEAD, POST, OPTIONS", "DELETE"},
		{"/api/v1/streams/order-1", "GET, HEAD, DELETE, OPTIONS", "POST"},
		{"/api/v1/subscriptions/hooks/parked/replay", "POST, OPTIONS", "GET"},
		{"/api/v1/health", "GET, HEAD, OPTIONS", "PUT"},
		{"/", "GET, HEAD, OPTIONS", "POST"},
		{"/assets/app.js", "GET, HEAD, OPTIONS", "PATCH"},
	} {
		// No token: a client learns what a path takes before it signs in.
		r := a.do("OPTIONS", c.path, nil, "Authorization", "")
		if r.status != http.StatusNoContent || r.header.Get("Allow") != c.allow || len(r.raw) != 0 {
			t.Errorf("OPTIONS %s: %d, Allow %q, want 204 and %q: %s", c.path, r.status, r.header.Get("Allow"), c.allow, r.raw)
		}
		r = a.want(a.do(c.refused, c.path, nil), 405, c.refused+" "+c.path)
		if r.header.Get("Allow") != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.refused, c.path, r.header.Get("Allow"), c.allow)
		}
	}
	a.want(a.do("OPTIONS", "/api/v1/nothing", nil), 404, "OPTIONS of no endpoint")
}

// TestParkedSelection: a replay or skip that names a position with no
// parked event of the subscription is a 404 naming that position, and
// does nothing, not even for the positions that are parked.
func TestParkedSelection(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	parked := park(t, store, "hooks", "poison", 3)
	sink := &recordingSink{}
	a := serve(t, store, server.Config{Writes: true, Replay: func(string) delivery.Sink { return sink }})
	left := func() int {
		t.Helper()
		l, err := delivery.NewParked(store, "hooks").List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	never := varve.Position{Seq: parked[2].Position.Seq + 1000}
	p0, p1, p2 := parked[0].Position.String(), parked[1].Position.String(), parked[2].Position.String()
	a.want(a.do("POST", "/api/v1/subscriptions/hooks/parked/skip", map[string]any{"positions": []string{p1}}), 200, "skip one")
	for _, c := range []struct {
		name, action string
		positions    []string
		missing      []any
	}{
		{"replay of a position never parked", "replay", []string{p0, never.String()}, []any{never.String()}},
		{"skip of a position never parked", "skip", []string{never.String(), p0}, []any{never.String()}},
		{"replay of a skipped event", "replay", []string{p1, p0}, []any{p1}},
		{"skip of a skipped event", "skip", []string{p2, p1, p1}, []any{p1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a.t = t
			path := "/api/v1/subscriptions/hooks/parked/" + c.action
			r := a.want(a.do("POST", path, map[string]any{"positions": c.positions}), 404, c.name)
			got, _ := r.body["error"].(map[string]any)["positions"].([]any)
			if r.errCode() != "not_parked" || fmt.Sprint(got) != fmt.Sprint(c.missing) || !strings.Contains(r.errMessage(), c.missing[0].(string)) {
				t.Fatalf("the answer: %s, want the positions %v", r.raw, c.missing)
			}
			if n := left(); n != 2 || len(sink.deliveries()) != 0 {
				t.Fatalf("a refused %s did something: %d left parked, %d replayed", c.action, n, len(sink.deliveries()))
			}
		})
	}
	a.t = t
	a.want(a.do("POST", "/api/v1/subscriptions/hooks/parked/replay", map[string]any{"positions": []string{p0, p2}}), 200, "replay of parked events")
	if n := left(); n != 0 || len(sink.deliveries()) != 2 {
		t.Fatalf("after the replay: %d left parked, %d replayed", n, len(sink.deliveries()))
	}
}

// TestSlowBody: a client that sends the headers of a request and then its
// body slowly, or not at all, is answered (408) within about the request's
// time, not held for as long as the client likes. The bound checked is
// generous: the point is that the server ends the request at all.
func TestSlowBody(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{Writes: true, RequestTimeout: 300 * time.Millisecond})
	addr := strings.TrimPrefix(a.url, "http://")
	for _, c := range []struct {
		name    string
		dribble bool
	}{
		{"stops", false},
		{"dribbles", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := "POST /api/v1/streams/slow/events HTTP/1.1\r\nHost: varve\r\nAuthorization: Bearer " + token +
				"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + `{"expected_version":"any","events":[`
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			var wg sync.WaitGroup
			if c.dribble {
				wg.Go(func() {
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-done:
							return
						case <-tick.C:
							if _, err := io.WriteString(conn, " "); err != nil {
								return
							}
						}
					}
				})
			}
			defer wg.Wait()
			defer close(done)
			if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"code":"request_timeout"`) {
				t.Fatalf("the answer: %d %s", res.StatusCode, body)
			}
		})
	}
	// The server still serves, and a body sent in time is taken.
	a.t = t
	a.want(a.do("POST", "/api/v1/streams/slow/events", `{"expected_version":"any","events":[{"type":"T"}]}`), 201, "an append in time")
}
