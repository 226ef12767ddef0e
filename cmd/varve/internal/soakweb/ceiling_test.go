package soakweb

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/internal/browsertest"
)

// ceilingPages is the WebAssembly memory V8 lets the module grow to in the
// ceiling test (64 KiB pages): V8's --wasm-max-mem-pages makes the
// browser's own ceiling small enough to reach in seconds.
const ceilingPages = 1024

// TestBrowserCeiling runs discovery with no memory limit and no pruning in
// a Chromium whose V8 caps WebAssembly memory (--js-flags
// --wasm-max-mem-pages): the module runs until it cannot grow its memory
// and dies with Go's "fatal error: out of memory". The page reports the
// end with its last figures, and the server's report names the ending and
// the ceiling from the samples the page posted before the module died.
func TestBrowserCeiling(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module and runs it in Chromium")
	}
	pages := ceilingPages
	if v, err := strconv.Atoi(os.Getenv("VARVE_CEILING_PAGES")); err == nil && v >= 0 {
		pages = v
	}
	ceiling(t, pages, 150*time.Second)
}

// ceiling runs discovery until the module dies, in a Chromium whose V8
// caps WebAssembly memory at pages (0: V8's own cap, 4 GiB for wasm32),
// waiting up to limit.
func ceiling(t *testing.T, pages int, limit time.Duration) {
	var flags []chromedp.ExecAllocatorOption
	if pages > 0 {
		flags = append(flags, chromedp.Flag("js-flags", fmt.Sprintf("--wasm-max-mem-pages=%d", pages)))
	}
	srv, url := serve(t)
	tb := browsertest.OpenFor(t, "find the browser soak's ceiling in", 1000, 900, limit+time.Minute, flags...)
	b := &tab{Tab: tb, t: t, ctx: tb.Ctx}
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url+fmt.Sprintf("?autostart=1&mode=discovery&duration=%d&limit_mib=0&workers=2&aggregates=1000&interval_ms=250", int(2*limit.Seconds())))); err != nil {
		t.Fatal(err)
	}
	var end string
	start := time.Now()
	for end == "" || end == "null" {
		if time.Since(start) > limit {
			t.Fatalf("the module did not die within %v; last sample %s\nthe page logged: %v", time.Since(start), b.eval("JSON.stringify(window.varveSoakLast || null)"), b.logged())
		}
		time.Sleep(500 * time.Millisecond)
		end = b.eval("JSON.stringify(window.varveSoakEnd || window.varveSoakResult || null)")
	}
	t.Logf("the module ended after %v: %s", time.Since(start).Round(time.Second), end)
	var e struct {
		ExitCode int    `json:"exit_code"`
		Fatal    string `json:"fatal"`
		Last     struct {
			HeapLive   uint64  `json:"heap_live"`
			LiveEvents int64   `json:"live_events"`
			Ops        int64   `json:"ops"`
			Rate       float64 `json:"rate"`
		} `json:"last"`
	}
	decode(t, end, &e)
	if e.ExitCode == 0 || !strings.Contains(e.Fatal, "cannot allocate memory") && !strings.Contains(e.Fatal, "out of memory") {
		t.Fatalf("the module ended with %s, want a non-zero exit and Go's fatal error on allocation", end)
	}
	if e.Last.LiveEvents == 0 {
		t.Fatalf("the page kept no figures before the module died: %s", end)
	}
	if got, want := b.text("verdict"), fmt.Sprintf("ceiling: last live heap %s holding %s events, %s commands/s; the module ended with exit code %d (%s)",
		mib(e.Last.HeapLive), grouped(e.Last.LiveEvents), grouped(int64(e.Last.Rate+0.5)), e.ExitCode, e.Fatal); got != want {
		t.Errorf("the page shows %q after the module died, want %q", got, want)
	}

	// The posts may still be in flight: wait for the end and the last sample.
	var rep lab.SoakReport
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		rep, err = srv.Report(lab.SoakConfig{})
		if err == nil && rep.Ended != "" && rep.Ceiling != nil && rep.Ceiling.LiveEvents == e.Last.LiveEvents {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's report (%v) does not end with the page's last figures %+v: %+v", err, e.Last, rep.Ceiling)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rep.Ended != EndedAllocation || !strings.Contains(rep.StopReason, e.Fatal) || rep.Pruned != 0 {
		t.Errorf("report: ended %q, stopped %q, %d streams pruned", rep.Ended, rep.StopReason, rep.Pruned)
	}
	if !strings.Contains(rep.Environment, "browser (WebAssembly in HeadlessChrome/") || !strings.Contains(rep.Environment, "no memory limit") {
		t.Errorf("environment %q", rep.Environment)
	}
	c := rep.Ceiling
	if c.HeapLive != e.Last.HeapLive || rep.Ops != e.Last.Ops {
		t.Errorf("report's ceiling %+v, %d commands; the page's last figures %+v", c, rep.Ops, e.Last)
	}
	var text strings.Builder
	if err := lab.PrintSoak(&text, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "Ceiling") || !strings.Contains(text.String(), strconv.FormatInt(c.LiveEvents, 10)+" events") {
		t.Errorf("the table lacks the ceiling:\n%s", text.String())
	}
	t.Logf("browser ceiling with WebAssembly memory capped at %d pages (%d MiB; 0: V8's own cap): live heap %s, heap %s, from the system %s, holding %d events at %.0f commands/s, %v in",
		pages, pages>>4, mib(c.HeapLive), mib(c.HeapAlloc), mib(c.Sys), c.LiveEvents, c.Rate, c.At.Round(time.Millisecond))
	b.shot(fmt.Sprintf("soak-browser-ceiling-%d-pages", pages))
	b.Forget() // the module's fatal error is what the test asked for
}
