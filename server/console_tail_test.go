package server_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestConsoleTail drives the $all live view in headless Chromium: the
// library's filter from the form, an empty state that says what it waits
// for, and a pause that holds new events back until it resumes.
func TestConsoleTail(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[0].Open(t, varve.Config{})
	ctx := t.Context()
	appendOne := func(stream, typ string) {
		t.Helper()
		if _, err := store.Append(ctx, stream, varve.Any, varve.NewEvent(typ, []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	appendOne("order-1", "Placed")
	appendOne("cart-1", "Added")
	appendOne("order-2", "Paid")
	a := serve(t, store, server.Config{})
	b.signIn(a)

	// A filter that matches nothing yet: the empty state says so.
	b.do("a filter of no events", chromedp.Navigate(a.url+"/#/all?after=start&category=invoice"), chromedp.WaitVisible(chromedp.ID("tail-empty")))
	b.until("live", `document.querySelector("#tail-status").textContent === "live"`)
	if e := b.text("tail-empty"); !strings.Contains(e, "match the filter") {
		t.Fatalf("the empty state says %q", e)
	}

	// The form's filter: the orders from the start.
	b.do("the form", chromedp.Navigate(a.url+"/#/all"), chromedp.WaitVisible(chromedp.ID("tail-from")))
	b.do("fill the filter", chromedp.Clear(chromedp.ID("tail-from")), chromedp.SendKeys(chromedp.ID("tail-from"), "start"),
		chromedp.SendKeys(chromedp.ID("tail-category"), "order"), click("#tail-follow"))
	b.until("the two orders", `document.querySelectorAll("#tail-rows tr[data-position]").length === 2`)
	if rows := b.text("tail-rows"); strings.Contains(rows, "cart-1") || !strings.Contains(rows, "order-2") {
		t.Fatalf("the filtered tail shows:\n%s", rows)
	}

	// Paused, new events are counted and held back; resumed, shown.
	b.do("pause", click("#tail-pause"))
	appendOne("order-3", "Placed")
	appendOne("cart-2", "Added")
	b.until("one event held", `document.querySelector("#tail-pause").textContent === "Resume (1 held)" && document.querySelector("#tail-count").textContent === "3"`)
	if rows := b.text("tail-rows"); strings.Contains(rows, "order-3") {
		t.Fatalf("a paused view shows a new event:\n%s", rows)
	}
	b.do("resume", click("#tail-pause"))
	b.until("the held event shown", `document.querySelectorAll("#tail-rows tr[data-position]").length === 3 && document.querySelector("#tail-pause").textContent === "Pause"`)
	if rows := b.text("tail-rows"); !strings.Contains(rows, "order-3") || strings.Contains(rows, "cart-2") {
		t.Fatalf("after resuming the view shows:\n%s", rows)
	}
	b.shot("tail-filtered")
}
