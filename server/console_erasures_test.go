package server_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
	"github.com/varve-go/varve/shred"
)

// TestConsoleErasures drives the erasures page in headless Chromium: an
// empty list; an erasure behind the subject typed, with its counts in the
// notice and the list; a read model's rows added to its report; a
// read-only server offers no erasure.
func TestConsoleErasures(t *testing.T) {
	b := newBrowser(t)
	store, sh := teststore.Kinds[1].OpenShredded(t, varve.Config{}) // SQLite, the embedded default
	ctx := t.Context()
	for _, subject := range []string{"user-1", "user-1", "user-1", "user-2"} {
		ev, err := sh.Seal(ctx, subject, varve.NewEvent("Registered", []byte(`{"email":"someone@example.com"}`)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Append(ctx, subject, varve.Any, ev); err != nil {
			t.Fatal(err)
		}
	}
	a := serve(t, store, server.Config{Writes: true})
	b.signIn(a)
	b.do("the erasures page", click(`nav a[data-view="erasures"]`), chromedp.WaitVisible(chromedp.ID("erasures")))
	if got := b.text("erasures"); !strings.Contains(got, "No erasures") {
		t.Fatalf("the page of a store without erasures shows:\n%s", got)
	}
	b.do("open the erase box", click(`#erase-box > summary`),
		chromedp.SendKeys(chromedp.ID("erase-subject"), "user-1"), click("#erase-count"),
		click("#erase-start"), chromedp.WaitVisible(chromedp.ID("confirm-name")))
	disabled := `document.querySelector("#confirm-go").disabled`
	b.until("the button disabled", disabled)
	b.do("a wrong subject", chromedp.SendKeys(chromedp.ID("confirm-name"), "user-"))
	b.until("the button still disabled", disabled)
	b.do("the subject", chromedp.SendKeys(chromedp.ID("confirm-name"), "1"))
	b.until("the button enabled", "!"+disabled)
	b.do("erase", click("#confirm-go"))
	b.until("the notice", `document.querySelector("#flash") !== null`)
	if f := b.text("flash"); !strings.Contains(f, "Erased user-1") || !strings.Contains(f, "3 events") {
		t.Fatalf("the notice says %q", f)
	}
	rs, err := shred.Reports(ctx, store, "user-1", 0)
	if err != nil || len(rs) != 1 || rs[0].Events != 3 {
		t.Fatalf("the store's reports: %+v, %v", rs, err)
	}
	if err := shred.ReadModelErased(ctx, store, shred.ReadModelErasure{Subject: "user-1", Key: rs[0].Key, ReadModel: "customers", Rows: 4}); err != nil {
		t.Fatal(err)
	}
	b.do("the page again", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("erasures")))
	row := b.text("erasures")
	for _, want := range []string{"user-1", rs[0].Key.String(), "3", "customers: 4 rows"} {
		if !strings.Contains(row, want) {
			t.Fatalf("the list lacks %q:\n%s", want, row)
		}
	}
	b.shot("erasures")

	ro := serve(t, store, server.Config{})
	b.signIn(ro)
	b.do("a read-only server's page", chromedp.Navigate(ro.url+"/#/erasures"), chromedp.WaitVisible(chromedp.ID("erase-off")))
	if got := b.text("erase-off"); !strings.Contains(got, "Writes are disabled") {
		t.Fatalf("a read-only server says %q", got)
	}
}
