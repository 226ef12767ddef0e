package server_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestConsoleLargeEvents: the console shows data nested 10,000 levels deep
// (the most the API takes) and a stream of 1 MiB arrays: the pages render
// without an error, a large value is drawn on demand and cut to a budget,
// deep levels open on a click, and the raw text holds the value.
func TestConsoleLargeEvents(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[0].Open(t, varve.Config{MaxEventSize: 2 << 20})
	ctx := t.Context()
	nest := func(levels int) []byte {
		return []byte(strings.Repeat(`{"a":[`, levels/2) + `"bottom"` + strings.Repeat(`]}`, levels/2))
	}
	if _, err := store.Append(ctx, "deep", varve.NoStream, varve.NewEvent("Deep", nest(10_000)), varve.NewEvent("Nested", nest(60))); err != nil {
		t.Fatal(err)
	}
	const bigEvents = 3
	for i := range bigEvents {
		var arr strings.Builder
		arr.WriteString("[")
		for n := 0; arr.Len() < 1<<20; n++ {
			if n > 0 {
				arr.WriteString(",")
			}
			arr.WriteString(strconv.Itoa(n))
		}
		arr.WriteString("]")
		if _, err := store.Append(ctx, "big", varve.Any, varve.NewEvent("Big", []byte(arr.String()))); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	a := serve(t, store, server.Config{})
	b.signIn(a)

	// open shows a stream and waits for its events or an error, for a
	// minute: the console drew a few 1 MiB arrays in minutes, its page
	// frozen meanwhile (so that the wait must end from here, not in the
	// page).
	open := func(stream string, events int) {
		t.Helper()
		b.do("open "+stream, chromedp.Navigate(a.url+"/#/stream/"+stream))
		wait, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		drawn := `document.querySelector("[role=alert]") !== null || document.querySelectorAll("#events article").length === ` + strconv.Itoa(events)
		if _, err := chromedp.Run(wait, chromedp.Poll[chromedp.Void](drawn)); err != nil {
			t.Fatalf("%s not drawn within a minute: %v\nthe page logged: %v", stream, err, b.logged())
		}
		if msg := b.eval(`document.querySelector("[role=alert]")?.innerText ?? ""`); msg != "" {
			t.Fatalf("%s: the page shows the error %q", stream, msg)
		}
	}

	open("deep", 2)
	// The small nested event is drawn at once, its deep levels folded.
	b.until("a fold", `document.querySelector('[data-version="2"] .j-fold') !== null`)
	folds := b.eval(`String(document.querySelectorAll('[data-version="2"] .j-fold').length)`)
	b.do("open the fold", click(`[data-version="2"] .j-fold`))
	b.until("the fold's levels", `document.querySelector('[data-version="2"] pre').innerText.includes('"bottom"')`)
	if folds != "1" {
		t.Fatalf("the 60 levels show %s folds, want 1", folds)
	}
	// The deep event is large: drawn on demand, folded past a depth.
	b.do("show the deep event", click(`[data-version="1"] .j-show`))
	b.until("its first levels", `document.querySelector('[data-version="1"] .j-fold') !== null`)
	b.do("its raw text", click(`[data-version="1"] .j-raw`))
	raw := b.eval(`document.querySelector('[data-version="1"] pre[data-part=data]').innerText`)
	if want := string(nest(10_000)); raw != want {
		t.Fatalf("the raw text of the deep event: %d characters, %.60q..., want %d", len(raw), raw, len(want))
	}

	open("big", bigEvents)
	if n := b.eval(`String(document.querySelectorAll("#events .j-show").length)`); n != strconv.Itoa(bigEvents) {
		t.Fatalf("%s of %d large events wait for a click to be drawn", n, bigEvents)
	}
	b.do("show a large event", click(`[data-version="3"] .j-show`))
	b.until("its items", `document.querySelector('[data-version="3"] .j-cut') !== null`)
	shown := b.eval(`document.querySelector('[data-version="3"] pre[data-part=data]').innerText`)
	if !strings.HasPrefix(shown, "[\n  0,\n  1,\n") || !strings.Contains(shown, "more items") || len(shown) > 100_000 {
		t.Fatalf("the large event drawn: %d characters, %.80q", len(shown), shown)
	}
	b.shot("large-event")
	b.do("its raw text", click(`[data-version="3"] .j-raw`))
	raw = b.eval(`document.querySelector('[data-version="3"] pre[data-part=data]').innerText`)
	if !strings.HasPrefix(raw, "[0,1,2,3,") || len(raw) > 300_000 || !strings.Contains(raw, "Copy") {
		t.Fatalf("the raw text of the large event: %d characters, %.80q", len(raw), raw)
	}

	// The live view of $all shows them too.
	b.do("follow $all", chromedp.Navigate(a.url+"/#/all?after=start"), chromedp.WaitVisible(chromedp.ID("tail")))
	b.until("every event", `document.querySelector("[role=alert]") !== null || document.querySelector("#tail-count").innerText === "5"`)
	if msg := b.eval(`document.querySelector("[role=alert]")?.innerText ?? ""`); msg != "" {
		t.Fatalf("$all: the page shows the error %q", msg)
	}
	b.shot("large-events")
	if p := b.logged(); len(p) > 0 {
		t.Fatalf("the console logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// eval returns the string value of a JavaScript expression on the page.
func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("%s: %v\nthe page logged: %v", expr, err, b.logged())
	}
	return s
}
