package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// soak --browser builds the module, serves the page, wasm_exec.js and the
// module on loopback, and when the page reports the end of the run writes
// the native soak's reports (table, JSON, HTML) from what the page posted. The test plays the page's part over HTTP; the page
// itself runs in Chromium in package soakweb's TestBrowserSoak.
func TestSoakBrowserServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	errOut := &syncBuffer{}
	dir := t.TempDir()
	jsonOut, htmlOut := filepath.Join(dir, "soak.json"), filepath.Join(dir, "soak.html")
	code := make(chan int, 1)
	go func() {
		code <- execute(ctx, []string{"soak", "--browser", "--mode", "discovery", "--memory-limit", "64MiB", "--duration", "30s",
			"--json=" + jsonOut, "--html", htmlOut}, &out, errOut)
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
	// The run's start, two samples and the result, as from the page; a
	// post of an older run is dropped.
	posts := [][2]string{
		{"report/start?run=7", `{"mode":"discovery","duration_ms":30000,"memory_limit":67108864,"prune_above":20000,"rate":0,"workers":4,"aggregates":1000,"interval_ms":1000,"threshold_pct":1,"min_slope_bytes_per_min":16384,"min_span_ms":60000}`},
		{"report/sample?run=7", `{"memory_limit":67108864,"mem":{"at_ns":0,"heap_live":1048576,"sys":8388608,"ops":0},"counts":{"ops":0}}`},
		{"report/sample?run=7", `{"memory_limit":67108864,"mem":{"at_ns":1000000000,"heap_live":15217048,"heap_alloc":20000000,"sys":33554432,"ops":42310},"counts":{"ops":42310,"events_appended":42310,"live_events":42310}}`},
		{"report/sample?run=6", `{"memory_limit":1,"mem":{"at_ns":2000000000,"heap_live":1,"ops":1},"counts":{"ops":1}}`},
		{"report/result?run=7", `{"mode":"discovery","stop_reason":"live heap 14.5 MiB reached 90% of the memory limit 16.0 MiB","elapsed_ms":1000,"memory_limit":67108864,"counts":{"ops":42310,"events_appended":42310,"live_events":42310},"latency":{"samples":42310,"p50_ns":100000,"p99_ns":300000,"max_ns":900000}}`},
	}
	for _, p := range posts {
		path, body := p[0], p[1]
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("User-Agent", "Mozilla/5.0 HeadlessChrome/156.0.0.0 Safari/537.36")
		res, err := http.DefaultClient.Do(req)
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
	for _, want := range []string{"Environment   browser (WebAssembly in HeadlessChrome/156.0.0.0, memory backend, debug.SetMemoryLimit 64.0 MiB)",
		"Commands      42310 (42310 ops/s)", "42310 live at the end", "stopped: live heap 14.5 MiB reached 90% of the memory limit 16.0 MiB",
		"Ceiling       live heap 14.5 MiB (heap 19.1 MiB, from the system 32.0 MiB) holding 42310 events at 42310 ops/s, 1s in"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	var env struct {
		Results []struct {
			Count   int64  `json:"count"`
			Stopped string `json:"stopped"`
		} `json:"results"`
		Details struct {
			Environment string `json:"environment"`
			Ceiling     struct {
				LiveEvents int64 `json:"live_events"`
			} `json:"ceiling"`
			Samples []json.RawMessage `json:"samples"`
		} `json:"details"`
	}
	b, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	if len(env.Results) != 1 || env.Results[0].Count != 42310 || env.Results[0].Stopped != "memory limit" ||
		!strings.HasPrefix(env.Details.Environment, "browser (WebAssembly in HeadlessChrome/156") || env.Details.Ceiling.LiveEvents != 42310 || len(env.Details.Samples) != 2 {
		t.Errorf("the JSON report: %s", b)
	}
	html, err := os.ReadFile(htmlOut)
	if err != nil || !bytes.Contains(html, []byte("browser (WebAssembly in HeadlessChrome/156.0.0.0")) {
		t.Errorf("the HTML report (%v) does not name the environment", err)
	}
}

func TestSoakBrowserLoopbackOnly(t *testing.T) {
	var out, errOut bytes.Buffer
	if c := execute(context.Background(), []string{"soak", "--browser", "--listen", "0.0.0.0:0"}, &out, &errOut); c != exitUsage || !strings.Contains(errOut.String(), "--listen") {
		t.Fatalf("exit code %d, want %d naming --listen:\n%s", c, exitUsage, errOut.String())
	}
}
