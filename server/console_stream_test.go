package server_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestConsoleStreamPaging drives a stream's page in headless Chromium:
// pages both ways, a page size, a jump to a version and an event's
// permalink.
func TestConsoleStreamPaging(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[0].Open(t, varve.Config{})
	for i := range 30 {
		if _, err := store.Append(t.Context(), "order-7", varve.Any, varve.NewEvent("Noted", fmt.Appendf(nil, `{"n":%d}`, i+1))); err != nil {
			t.Fatal(err)
		}
	}
	a := serve(t, store, server.Config{})
	b.signIn(a)
	shown := func(want string) {
		t.Helper()
		b.until("versions "+want, `[...document.querySelectorAll("#events article")].map(a => a.dataset.version).join(",") === "`+want+`"`)
	}
	b.do("the stream, 10 a page", chromedp.Navigate(a.url+"/#/stream/order-7?limit=10"), chromedp.WaitVisible(chromedp.ID("events")))
	shown("30,29,28,27,26,25,24,23,22,21")
	b.do("older", click("#more"))
	shown("20,19,18,17,16,15,14,13,12,11")
	b.do("newer again", click("#back"))
	shown("30,29,28,27,26,25,24,23,22,21")
	b.do("jump to version 5", chromedp.SendKeys(chromedp.ID("jump-version"), "5"), click(`#jump button`))
	shown("5,6,7,8,9,10,11,12,13,14")
	b.do("older, forward", click("#back"))
	shown("1,2,3,4,5,6,7,8,9,10")
	b.do("50 a page", chromedp.SetValue(chromedp.ID("page-size"), "50"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#page-size").dispatchEvent(new Event("change"))`))
	b.until("every event on one page", `document.querySelectorAll("#events article").length === 30`)
	b.do("the permalink of version 7", click(`#events article[data-version="7"] a.permalink`))
	shown("7")
}
