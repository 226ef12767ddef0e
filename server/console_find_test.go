package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestConsoleFind drives the browsing of $all and the finding of events in
// headless Chromium: pages newest first, older and newer, the library's
// filter, a lookup by event id that leads to the event's page, and one by
// correlation id.
func TestConsoleFind(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[0].Open(t, varve.Config{})
	ctx := t.Context()
	var events []varve.Event
	for i := range 45 {
		e := varve.NewEvent([]string{"Placed", "Added", "Paid"}[i%3], []byte(fmt.Sprintf(`{"n":%d}`, i)))
		e.Metadata = []byte(fmt.Sprintf(`{"correlation_id":"req-%d"}`, i%5))
		if _, err := store.Append(ctx, []string{"order-", "cart-", "order-"}[i%3]+fmt.Sprint(i%4), varve.Any, e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	a := serve(t, store, server.Config{})
	b.signIn(a)
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	rows := func() string {
		return eval(`[...document.querySelectorAll("tbody tr[data-position]")].map(r => r.dataset.position).join(",")`)
	}
	positions := func(from, to int) string {
		var out []string
		for p := from; p >= to; p-- {
			out = append(out, fmt.Sprint(p))
		}
		return strings.Join(out, ",")
	}

	// Newest first, 20 a page; older, then newer again.
	b.do("the log", chromedp.Navigate(a.url+"/#/log?limit=20"), chromedp.WaitVisible(chromedp.ID("log")))
	if got := rows(); got != positions(45, 26) {
		t.Fatalf("the newest page shows positions %s", got)
	}
	if got := eval(`String(document.getElementById("log-newer"))`); got != "null" {
		t.Fatalf("the newest page offers newer events (%s)", got)
	}
	b.do("older", click("#log-older"))
	b.until("the page before", `document.querySelector("#log tbody tr").dataset.position === "25"`)
	b.do("older again", click("#log-older"))
	b.until("the last page", `document.querySelector("#log tbody tr").dataset.position === "5"`)
	if got := rows(); got != positions(5, 1) {
		t.Fatalf("the oldest page shows positions %s", got)
	}
	b.do("newer", click("#log-newer"))
	b.until("the page after", `document.querySelector("#log tbody tr").dataset.position === "25"`)
	if got := rows(); got != positions(25, 6) {
		t.Fatalf("the newer page shows positions %s", got)
	}

	// The filter: the carts (every third event, from the second).
	b.do("filter", chromedp.SendKeys(chromedp.ID("log-category"), "cart"), click("#log-apply"))
	b.until("the carts", `location.hash.includes("category=cart") && document.querySelector("#log tbody tr").dataset.position === "44"`)
	if got := b.text("log"); strings.Contains(got, "order-") || strings.Count(got, "cart-") != 15 {
		t.Fatalf("the carts' page shows:\n%s", got)
	}
	b.shot("log-filtered")

	// By id: one event found, and its page.
	want := events[17]
	b.do("find by id", chromedp.SendKeys(chromedp.ID("find-value"), want.ID.String()), click("#find-submit"))
	b.until("found", `document.querySelectorAll("#found tbody tr[data-position]").length === 1`)
	b.do("open it", click(`#found tbody tr a.mono`))
	b.until("the event's page", `document.querySelector("#card-event-id") !== null`)
	if got := b.text("card-event-id"); got != want.ID.String() {
		t.Fatalf("the event's page shows id %q, want %s", got, want.ID)
	}
	if got := b.text("event"); !strings.Contains(got, `"n": 17`) || !strings.Contains(got, "req-2") {
		t.Fatalf("the event's page shows:\n%s", got)
	}
	if got := b.text("card-event-position"); got != "18" {
		t.Fatalf("the event's position shows %q, want 18", got)
	}
	b.shot("event")

	// By correlation id: req-3 is 9 events, newest first.
	b.do("find by correlation id", chromedp.Navigate(a.url+"/#/log"), chromedp.WaitVisible(chromedp.ID("find-value")),
		chromedp.SendKeys(chromedp.ID("find-value"), "req-3"), click("#find-submit"))
	b.until("found", `document.querySelectorAll("#found tbody tr[data-position]").length === 9`)
	if got := rows(); got != "44,39,34,29,24,19,14,9,4" {
		t.Fatalf("events with correlation id req-3 at %s", got)
	}
	if got := b.text("find-summary"); !strings.Contains(got, "45 events read") || !strings.Contains(got, "start of $all") {
		t.Fatalf("the search says %q", got)
	}
	b.shot("find")
}
