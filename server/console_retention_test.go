package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/retention"
	"github.com/varve-go/varve/server"
)

// TestConsoleRetention drives the retention page in headless Chromium: a
// store without policies says so; with policies it lists them, categories
// first, with the last pass of the scavenger and what it truncated, and
// the stream ids link to their streams.
func TestConsoleRetention(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[1].Open(t, varve.Config{}) // SQLite, the embedded default
	ctx := t.Context()
	a := serve(t, store, server.Config{})
	b.signIn(a)
	b.do("an empty retention page", chromedp.Navigate(a.url+"/#/retention"), chromedp.WaitVisible(chromedp.ID("retention")))
	if got := b.text("retention"); !strings.Contains(got, "No retention policies") {
		t.Fatalf("the page of a store without policies shows:\n%s", got)
	}
	if got := b.text("card-last-pass"); got != "none recorded" {
		t.Fatalf("the last pass of a store without one: %q", got)
	}

	for _, stream := range []string{"order-1", "order-2", "order-7"} {
		for range 4 {
			if _, err := store.Append(ctx, stream, varve.Any, varve.NewEvent("Noted", []byte(`{}`))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range []struct {
		target retention.Target
		policy retention.Policy
	}{
		{retention.Target{Category: "order"}, retention.Policy{MaxCount: 1}},
		{retention.Target{Stream: "order-7"}, retention.Policy{}},
		{retention.Target{Stream: "order-2"}, retention.Policy{MaxAge: 720 * time.Hour, MaxCount: 2, AllowEmpty: true}},
	} {
		if err := retention.Set(ctx, store, p.target, p.policy); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := retention.New(retention.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ScavengeOnce(ctx); err != nil {
		t.Fatal(err)
	}
	b.do("the retention page", chromedp.Navigate(a.url+"/#/dashboard"), chromedp.WaitVisible(chromedp.ID("dash-cards")),
		click(`nav a[data-view="retention"]`), chromedp.WaitVisible(chromedp.ID("retention-truncations")))
	b.until("the nav link marked", `document.querySelector('nav a[data-view="retention"]').classList.contains("active")`)
	rows := b.text("retention")
	for _, want := range []string{"category", "order", "max count 1", "order-2", "max age 720h0m0s, max count 2, may remove the last event", "order-7", "no limit"} {
		if !strings.Contains(rows, want) {
			t.Fatalf("the policies lack %q:\n%s", want, rows)
		}
	}
	if strings.Index(rows, "category") > strings.Index(rows, "stream") {
		t.Fatalf("categories are not listed first:\n%s", rows)
	}
	if got := b.text("card-removed"); got != "5" {
		t.Fatalf("events removed: %q, want 5 (3 of order-1, 2 of order-2)", got)
	}
	if got := b.text("retention-truncations"); !strings.Contains(got, "order-1") || !strings.Contains(got, "order-2") || strings.Contains(got, "order-7") {
		t.Fatalf("the truncations show:\n%s", got)
	}
	b.shot("retention")
	b.do("a stream's link", click(`#retention-truncations a[href="#/stream/order-1"]`), chromedp.WaitVisible(chromedp.ID("events")))
}
