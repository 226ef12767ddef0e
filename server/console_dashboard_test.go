package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestConsoleDashboard drives the dashboard in headless Chromium, the page
// after sign-in: while the test appends through the API, the head card
// changes and the charts grow; a consumer with a checkpoint has a lag
// line; the page fits 390 px and follows dark mode; leaving the page stops
// its requests.
func TestConsoleDashboard(t *testing.T) {
	b := newBrowser(t)
	m := server.NewMeter()
	store := teststore.Kinds[1].Open(t, varve.Config{Tracer: m})
	ctx := t.Context()
	if _, err := store.Append(ctx, "order-1", varve.NoStream, varve.NewEvent("Placed", []byte(`{"n":0}`))); err != nil {
		t.Fatal(err)
	}
	if err := store.Checkpoints().Save(ctx, "billing", varve.Start); err != nil {
		t.Fatal(err)
	}
	a := serve(t, store, server.Config{Writes: true, Meter: m, SampleInterval: 100 * time.Millisecond})
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}

	b.signIn(a)
	if got := eval(`location.hash + " " + document.title + " " + document.querySelector("nav a").textContent + " " + document.querySelector("nav a.active").textContent`); got != "#/dashboard Dashboard · varve console Dashboard Dashboard" {
		t.Fatalf("after sign-in: %q", got)
	}
	b.until("a sample shown", `document.querySelector("#card-head") !== null`)
	head := b.text("card-head")

	// Appends through the API while the page is shown.
	appended := 0
	appendSome := func() {
		t.Helper()
		for range 3 {
			appended++
			a.want(a.do("POST", "/api/v1/streams/order-1/events", map[string]any{"expected_version": "any",
				"events": []map[string]any{{"type": "Placed", "data": map[string]int{"n": appended}}}}), 201, "an append")
		}
	}
	appendSome()
	b.until("the head card changes", `document.querySelector("#card-head").textContent !== "`+head+`"`)
	appendSome()
	b.until("two points of events per second", `Number((document.querySelector("#chart-events path[data-points]") || {dataset: {}}).dataset.points) >= 2`)
	// The latency card shows the last sample's appends: append until a
	// sample with appends is the last one the page shows.
	latency := `/ms$/.test(document.querySelector("#card-latency").textContent) && document.querySelector("#chart-latency path") !== null`
	for attempt := 0; ; attempt++ {
		if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](latency, chromedp.WithPollingTimeout(2*time.Second))); err == nil {
			break
		}
		if attempt == 30 {
			t.Fatalf("the appends' latency never showed (%s); the page logged: %v", latency, b.logged())
		}
		appendSome()
	}
	b.until("a lag line for billing", `document.querySelector('#chart-lag path[data-series="billing"]') !== null`)
	if legend := b.text("chart-lag"); !strings.Contains(legend, "billing") {
		t.Fatalf("the lag chart's legend: %q", legend)
	}
	if row := b.text("dash-consumer-table"); !strings.Contains(row, "billing") || !strings.Contains(row, " s") {
		t.Fatalf("the consumers table: %q", row)
	}
	if size := b.text("card-size"); !strings.HasSuffix(size, "KiB") && !strings.HasSuffix(size, "MiB") {
		t.Fatalf("the size card: %q", size)
	}
	if own := b.text("card-appends"); own == "not measured" {
		t.Fatalf("the appends card: %q", own)
	}
	b.shot("dashboard")

	// 390 px wide, charts drawn: nothing wider than the window.
	b.do("a 390 px window", chromedp.EmulateViewport(390, 844))
	b.until("the charts laid out", `document.querySelector("#chart-events svg").getBoundingClientRect().width > 0`)
	var sw, iw int
	fmt.Sscan(eval(`String(document.documentElement.scrollWidth) + " " + String(window.innerWidth)`), &sw, &iw)
	if sw > iw || iw != 390 {
		t.Fatalf("the dashboard at 390 px is %d px wide in a window of %d", sw, iw)
	}
	// Dark mode: the lines take the dark palette.
	stroke := `getComputedStyle(document.querySelector("#chart-events path.s0")).stroke`
	light := eval(stroke)
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	if dark := eval(stroke); dark == light || dark != "rgb(108, 178, 224)" {
		t.Fatalf("the first line's colour: %s light, %s dark", light, dark)
	}
	b.shot("dashboard-390-dark")

	// Leaving the page stops its requests: none while the server takes
	// five more samples.
	b.do("leave", chromedp.Navigate(a.url+"/#/streams"), chromedp.WaitVisible(chromedp.ID("streams")))
	eval(`(() => { window.dashFetches = 0; const f = window.fetch; window.fetch = (u, o) => { if (String(u).includes("dashboard")) window.dashFetches++; return f(u, o); }; return ""; })()`)
	d, _ := a.dashboard("")
	waitFor(t, "five more samples", func() bool { again, _ := a.dashboard(""); return again.Next >= d.Next+5 })
	if n := eval(`String(window.dashFetches)`); n != "0" {
		t.Fatalf("the page asked for the dashboard %s times after leaving it", n)
	}

	if p := b.logged(); len(p) > 0 {
		t.Fatalf("the console logged problems:\n%s", strings.Join(p, "\n"))
	}
}
