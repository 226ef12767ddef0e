package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// soak --browser builds the module, serves the page, wasm_exec.js and the
// module on loopback, and prints what the page posts back when it reports
// the end of the run. The test plays the page's part over HTTP; the page
// itself runs in Chromium in package soakweb's TestBrowserSoak.
func TestSoakBrowserServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	errOut := &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- execute(ctx, []string{"soak", "--browser", "--mode", "discovery", "--memory-limit", "64MiB", "--duration", "30s"}, &out, errOut)
	}()
	addr := regexp.MustCompile(`open (http://127\.0\.0\.1:\d+/)(\?\S+)`)
	var m []string
	for m == nil {
		select {
		case c := <-code:
			t.Fatalf("soak --browser exited with %d before serving:\n%s", c, errOut.String())
		case <-time.After(100 * time.Millisecond):
		}
		m = addr.FindStringSubmatch(errOut.String())
	}
	base, query := m[1], m[2]
	for _, want := range []string{"mode=discovery", "limit_mib=64", "duration=30"} {
		if !strings.Contains(query, want) {
			t.Errorf("the printed address %s%s does not carry %s", base, query, want)
		}
	}
	get := func(path string) []byte {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
		}
		return b
	}
	for path, want := range map[string]string{"": "varve soak in the browser", "wasm_exec.js": "globalThis.Go = class", "soak.wasm": "\x00asm"} {
		if b := get(path); !bytes.Contains(b, []byte(want)) {
			t.Errorf("GET /%s: no %q in %d bytes", path, want, len(b))
		}
	}
	// The sample first, then the result, as from the page.
	for _, p := range [][2]string{{"report/sample", `{"heap_live":15217048,"live_events":42310}`}, {"report/result", `{"mode":"discovery","peak_heap_live":15217048}`}} {
		path, body := p[0], p[1]
		res, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("POST /%s: %d", path, res.StatusCode)
		}
	}
	if c := <-code; c != 0 {
		t.Fatalf("exit code %d:\n%s", c, errOut.String())
	}
	for _, want := range []string{"environment: browser", `last sample: {"heap_live":15217048,"live_events":42310}`, `result: {"mode":"discovery","peak_heap_live":15217048}`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSoakBrowserLoopbackOnly(t *testing.T) {
	var out, errOut bytes.Buffer
	if c := execute(context.Background(), []string{"soak", "--browser", "--listen", "0.0.0.0:0"}, &out, &errOut); c != exitUsage || !strings.Contains(errOut.String(), "--listen") {
		t.Fatalf("exit code %d, want %d naming --listen:\n%s", c, exitUsage, errOut.String())
	}
}
