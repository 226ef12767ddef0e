//go:build soaklong

package soakweb

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/varve-go/varve/internal/browsertest"
)

// The long browser soaks, for `make soak-long` (-tags soaklong): a 10 min
// sustained run at the defaults of `varve soak` (memory limit 512 MiB,
// prune above 20,000 live events, no rate cap), judged with the native
// soak's default threshold on the slope's 95% interval (the live heap saws
// 8-14 MB wide: over a one-minute half the slope swung +-700 KiB/min, and
// over 5 minutes the slope alone judged 2 of 3 runs growing), and a
// discovery run under 512 MiB. Each logs the module's result; screenshots
// go to VARVE_SCREENSHOTS.
func TestLongBrowserSustained(t *testing.T) {
	_, url := serve(t)
	tb := browsertest.OpenFor(t, "run the browser soak in", 1000, 900, 12*time.Minute)
	b := &tab{Tab: tb, t: t, ctx: tb.Ctx}
	var r moduleResult
	decode(t, b.run(url+"?autostart=1&mode=sustained&duration=600&limit_mib=512&prune_above=20000&rate=0&workers=4&aggregates=1000&interval_ms=1000", 660*time.Second), &r)
	t.Logf("%+v", r)
	for _, tr := range r.Verdict.Trends {
		t.Logf("%s: slope %+.1f KiB/min, 95%% from %+.1f (%.2f%% of the mean per 10 min)", tr.Name, tr.SlopePerMin/1024, tr.SlopeLow/1024, tr.Pct)
	}
	b.shot("soak-browser-long-sustained")
	if r.Error != "" || r.Verdict.Status != "flat" {
		t.Fatalf("long sustained run in the browser: %s, verdict %q", r.Error, r.Verdict.Status)
	}
}

func TestLongBrowserDiscovery(t *testing.T) {
	_, url := serve(t)
	b := newTab(t)
	var r moduleResult
	decode(t, b.run(url+"?autostart=1&mode=discovery&duration=160&limit_mib=512&workers=4&aggregates=1000&interval_ms=1000", 170*time.Second), &r)
	t.Logf("ceiling: live heap %s holding %d events; %+v", mib(r.PeakLive), r.LiveAtPeak, r)
	b.shot("soak-browser-long-discovery")
	if r.Error != "" || r.PeakLive == 0 {
		t.Fatalf("long discovery run in the browser: %s", r.Error)
	}
}

// The browser's own ceiling: discovery with no memory limit and no cap on
// WebAssembly memory but V8's (4 GiB for wasm32), until the module cannot
// grow its memory or the tab dies. On 2 shared cores the rate falls as
// the heap grows (about 1,400 commands/s at 260 MiB of live heap after
// 10 min): it can take over an hour. VARVE_CEILING_PAGES caps WebAssembly
// memory lower (64 KiB pages).
func TestLongBrowserCeiling(t *testing.T) {
	pages := 0
	if v, err := strconv.Atoi(os.Getenv("VARVE_CEILING_PAGES")); err == nil && v > 0 {
		pages = v
	}
	ceiling(t, pages, 140*time.Minute)
}
