package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestConsoleLifecycle drives a stream's lifecycle box in headless
// Chromium: truncate, delete and tombstone, each behind the stream's id
// typed (the button disabled until it matches), each followed by the page
// drawn again with a notice and the new state; a delete of a stream
// written since the page was drawn is refused, and the page says why.
func TestConsoleLifecycle(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[1].Open(t, varve.Config{}) // SQLite, the embedded default
	ctx := t.Context()
	for _, c := range []struct {
		stream string
		n      int
	}{{"order-7", 10}, {"order-8", 3}, {"order-9", 2}} {
		for i := range c.n {
			if _, err := store.Append(ctx, c.stream, varve.Exact(varve.Version(i)), varve.NewEvent("Noted", fmt.Appendf(nil, `{"n":%d}`, i+1))); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := serve(t, store, server.Config{Writes: true})
	b.signIn(a)
	openBox := func(stream string) {
		t.Helper()
		// The page shown before is drawn until the new one's reads are
		// answered: wait for this stream's page before opening its box.
		b.do("the page of "+stream, chromedp.Navigate(a.url+"/#/stream/"+stream))
		b.until("the page of "+stream, fmt.Sprintf(`document.querySelector("#stream-id") !== null && document.querySelector("#stream-id").textContent === %q && document.querySelector("#lifecycle-box") !== null`, stream))
		b.do("open the lifecycle box", click(`#lifecycle-box > summary`))
		b.until("the lifecycle box open", `document.querySelector("#lifecycle-box").open`)
	}
	disabled := `document.querySelector("#confirm-go").disabled`

	// Truncate: the button waits for the stream's id.
	openBox("order-7")
	b.do("truncate before 4", chromedp.SendKeys(chromedp.ID("truncate-before"), "4"), click("#truncate-start"), chromedp.WaitVisible(chromedp.ID("confirm-name")))
	b.until("the button disabled", disabled)
	b.do("a wrong id", chromedp.SendKeys(chromedp.ID("confirm-name"), "order-"))
	b.until("the button still disabled", disabled)
	b.do("the right id", chromedp.SendKeys(chromedp.ID("confirm-name"), "7"))
	b.until("the button enabled", "!"+disabled)
	if q := b.text("confirm"); !strings.Contains(q, "below version 4") || !strings.Contains(q, "order-7") {
		t.Fatalf("the truncate question says %q", q)
	}
	b.shot("lifecycle-confirm")
	b.do("confirm", click("#confirm-go"))
	b.until("the truncated page", `document.querySelector("#flash") !== null && Math.min(...[...document.querySelectorAll("#events article")].map(a => Number(a.dataset.version))) === 4`)
	if f, v := b.text("flash"), b.text("card-version"); !strings.Contains(f, "below version 4") || v != "10" {
		t.Fatalf("after truncate the page says %q, version %q", f, v)
	}
	if n := len(readVersions(t, store, "order-7")); n != 7 {
		t.Fatalf("after truncate before 4 the store holds %d events of order-7, want 7", n)
	}
	b.shot("lifecycle-truncated")
	// Oldest first, the first page left is the oldest: no link leads below
	// it to the versions that are gone.
	b.do("oldest first", chromedp.Navigate(a.url+"/#/stream/order-7?dir=forward&from=2&limit=2"), chromedp.WaitVisible(chromedp.ID("events")))
	b.until("the first page left", `document.querySelector("#events article") !== null && document.querySelector("#events article").dataset.version === "4"`)
	if older, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.getElementById("back") === null`)); err != nil || !older {
		t.Fatalf("the first page left after a truncation offers older events (%v)", err)
	}

	// Delete: the state badge says deleted; an append can start it afresh.
	b.do("open the lifecycle box", click(`#lifecycle-box > summary`))
	b.until("the lifecycle box open", `document.querySelector("#lifecycle-box").open`)
	b.do("delete", click("#delete-start"), chromedp.WaitVisible(chromedp.ID("confirm-name")))
	b.until("the button disabled", disabled)
	b.do("the id", chromedp.SendKeys(chromedp.ID("confirm-name"), "order-7"))
	b.until("the button enabled", "!"+disabled)
	b.do("confirm", click("#confirm-go"))
	b.until("the deleted state", `document.querySelector("#card-state") !== null && document.querySelector("#card-state").textContent === "deleted"`)
	if f := b.text("flash"); !strings.Contains(f, "afresh") {
		t.Fatalf("after delete the page says %q", f)
	}
	if info, err := store.StreamInfo(ctx, "order-7"); err != nil || !info.Deleted || info.Tombstoned {
		t.Fatalf("after delete the store has %+v, %v", info, err)
	}
	b.until("the append box kept, delete gone", `document.querySelector("#append-box") !== null && document.querySelector("#delete-start") === null && document.querySelector("#tombstone-start") !== null`)
	b.shot("lifecycle-deleted")

	// Tombstone: it says it is permanent; the append box goes.
	openBox("order-8")
	b.do("tombstone", click("#tombstone-start"), chromedp.WaitVisible(chromedp.ID("confirm-name")))
	if q := b.text("confirm"); !strings.Contains(q, "permanent") || !strings.Contains(q, "cannot be undone") {
		t.Fatalf("the tombstone question says %q", q)
	}
	b.until("the button disabled", disabled)
	b.do("the id", chromedp.SendKeys(chromedp.ID("confirm-name"), "order-8"))
	b.until("the button enabled", "!"+disabled)
	b.do("confirm", click("#confirm-go"))
	b.until("the tombstoned state", `document.querySelector("#card-state") !== null && document.querySelector("#card-state").textContent === "tombstoned"`)
	b.until("the append and lifecycle boxes gone", `document.querySelector("#append-box") === null && document.querySelector("#lifecycle-box") === null`)
	if info, err := store.StreamInfo(ctx, "order-8"); err != nil || !info.Tombstoned {
		t.Fatalf("after tombstone the store has %+v, %v", info, err)
	}
	b.shot("lifecycle-tombstoned")

	// A stream written after the page was drawn: the delete expected the
	// version shown, the API refuses it, and the page says why.
	openBox("order-9")
	if _, err := store.Append(ctx, "order-9", varve.Exact(2), varve.NewEvent("Late", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	b.do("delete", click("#delete-start"), chromedp.WaitVisible(chromedp.ID("confirm-name")))
	b.do("the id", chromedp.SendKeys(chromedp.ID("confirm-name"), "order-9"))
	b.until("the button enabled", "!"+disabled)
	b.do("confirm", click("#confirm-go"))
	b.until("the refusal", `document.querySelector("#lifecycle-out [role=alert]") !== null`)
	if e := b.text("lifecycle-out"); !strings.Contains(e, "wrong expected version") {
		t.Fatalf("the refused delete shows %q", e)
	}
	if info, err := store.StreamInfo(ctx, "order-9"); err != nil || info.Deleted || info.Version != 3 {
		t.Fatalf("after the refused delete the store has %+v, %v", info, err)
	}

	// At a phone's width, in dark mode, the box and its question fit.
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	b.do("a 390 px window", chromedp.EmulateViewport(390, 844))
	b.do("tombstone (the box is open still)", click("#tombstone-start"), chromedp.WaitVisible(chromedp.ID("confirm-name")),
		chromedp.ScrollIntoView(chromedp.ID("lifecycle-box")))
	b.until("no sideways scrolling", `document.documentElement.scrollWidth <= window.innerWidth`)
	b.shot("lifecycle-390-dark")

	// What the page logged: the reads of the deleted and the tombstoned
	// stream's events (404, 410) and the refused delete (409), nothing else.
	for _, p := range b.logged() {
		if !strings.Contains(p, "404") && !strings.Contains(p, "410") && !strings.Contains(p, "409") {
			t.Errorf("the console logged %q", p)
		}
	}
}

// readVersions returns the versions of the events of stream.
func readVersions(t *testing.T, store *varve.Store, stream string) []varve.Version {
	t.Helper()
	var vs []varve.Version
	for e, err := range store.ReadStream(t.Context(), stream) {
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, e.Version)
	}
	return vs
}
