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

// TestConsoleLayout drives the console's frame in headless Chromium: the
// navigation only while signed in, no stray "null" on a page, a tab title
// per page, dark mode when the system asks for it, and no page wider than
// a 390 px window.
func TestConsoleLayout(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[0].Open(t, varve.Config{})
	ctx := t.Context()
	long := strings.Repeat("x", 200)
	for _, s := range []string{"order-1", "order-" + long} {
		if _, err := store.Append(ctx, s, varve.Any, varve.NewEvent("OrderPlaced", []byte(`{"note":"`+long+`"}`))); err != nil {
			t.Fatal(err)
		}
	}
	park(t, store, "hooks", "payment-1", 1)
	a := serve(t, store, server.Config{Writes: true})
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	navShown := `getComputedStyle(document.getElementById("nav")).display + " " + getComputedStyle(document.getElementById("logout")).display`

	b.do("open the console", chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	if got := eval(navShown); got != "none none" {
		t.Fatalf("before sign-in the navigation and sign-out show (display %s)", got)
	}
	if got := eval(`document.title`); got != "Sign in · varve console" {
		t.Errorf("the sign-in page's title is %q", got)
	}
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), token), click("#signin"), chromedp.WaitVisible(chromedp.ID("dash-cards")))
	if got := eval(navShown); strings.Contains(got, "none") {
		t.Fatalf("signed in, the navigation or sign-out is hidden (display %s)", got)
	}

	pages := []struct{ hash, ready, title string }{
		{"#/dashboard", "dash-cards", "Dashboard · varve console"},
		{"#/streams", "streams", "Streams · varve console"},
		{"#/stream/order-1", "events", "order-1 · Stream · varve console"},
		{"#/all", "tail-rows", "$all live · varve console"},
		{"#/log", "log", "$all · varve console"},
		{"#/find?correlation_id=x", "found", "Find · varve console"},
		{"#/event/order-1/1", "event", "OrderPlaced · order-1 v1 · varve console"},
		{"#/subscriptions", "subscriptions", "Subscriptions · varve console"},
		{"#/subscription/hooks", "parked", "hooks · Subscription · varve console"},
	}
	visit := func(size string) {
		for _, p := range pages {
			b.do("open "+p.hash, chromedp.Navigate(a.url+"/"+p.hash), chromedp.WaitVisible(chromedp.ID(p.ready)))
			if got := eval(`document.title`); got != p.title {
				t.Errorf("%s (%s): title %q, want %q", p.hash, size, got, p.title)
			}
			// A top-level text node "null" is a missing element printed.
			if got := eval(`[...document.getElementById("main").childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join("|")`); got != "" {
				t.Errorf("%s (%s): stray text %q in the page", p.hash, size, got)
			}
			if w := eval(`String(document.documentElement.scrollWidth) + " " + String(window.innerWidth)`); size == "390" {
				var sw, iw int
				fmt.Sscan(w, &sw, &iw)
				if sw > iw {
					t.Errorf("%s at 390 px: the page is %d px wide in a window of %d", p.hash, sw, iw)
				}
			}
		}
	}
	visit("wide")
	b.shot("layout-wide")

	// Dark mode follows the system's setting.
	bg := `getComputedStyle(document.body).backgroundColor`
	light := eval(bg)
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	dark := eval(bg)
	var r, g, bl int
	if _, err := fmt.Sscanf(dark, "rgb(%d, %d, %d)", &r, &g, &bl); err != nil || r+g+bl > 3*64 || dark == light {
		t.Fatalf("dark mode: the page's background is %s (light: %s), want a dark one", dark, light)
	}
	b.shot("layout-dark")

	// A phone's width.
	b.do("a 390 px window", chromedp.EmulateViewport(390, 844))
	visit("390")
	b.shot("layout-390")

	b.do("sign out", click("#logout"), chromedp.WaitVisible(chromedp.ID("token")))
	if got := eval(navShown); got != "none none" {
		t.Fatalf("after sign-out the navigation and sign-out show (display %s)", got)
	}
}
