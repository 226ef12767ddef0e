package server_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
	"github.com/varve-go/varve/workflow"
)

// TestConsoleWorkflows drives the workflows page in headless Chromium: a
// workflow's instances listed by its name, an instance whose input failed
// shown with its error and pending timer, a retry requested, a cancel
// behind the stream typed; a read-only server offers neither.
func TestConsoleWorkflows(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[1].Open(t, varve.Config{}) // SQLite
	ctx := t.Context()
	fail := true
	def := workflow.Definition[string]{
		Name: "shipping",
		Route: func(e *varve.RecordedEvent) (string, bool) {
			return string(e.Data[1 : len(e.Data)-1]), e.Type == "Placed" || e.Type == "Paid"
		},
		Evolve: func(_ string, e *varve.RecordedEvent) string { return e.Type },
		Decide: func(_ string, in workflow.Input) (workflow.Decision, error) {
			if in.Type == "Paid" && fail {
				return workflow.Decision{}, errors.New("carrier down")
			}
			return workflow.Decision{Events: []varve.Event{{Type: "Waiting"}}, Commands: []workflow.Command{{Type: "Reserve"}},
				Timers: []workflow.Timer{{ID: "payment", Due: time.Now().Add(time.Hour)}}}, nil
		},
	}
	r, err := workflow.NewRunner(store, def, dropSender{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []struct{ stream, typ, id string }{{"orders-1", "Placed", "o1"}, {"orders-1", "Paid", "o1"}, {"orders-2", "Placed", "o2"}} {
		res, err := store.Append(ctx, in.stream, varve.Any, varve.NewEvent(in.typ, []byte(`"`+in.id+`"`)))
		if err != nil {
			t.Fatal(err)
		}
		for e, err := range store.ReadStream(ctx, in.stream, varve.From(res.FirstVersion)) {
			if err != nil {
				t.Fatal(err)
			}
			_ = r.Handle(ctx, e)
		}
	}

	a := serve(t, store, server.Config{Writes: true})
	b.signIn(a)
	b.do("the workflows page", click(`nav a[data-view="workflows"]`), chromedp.WaitVisible(chromedp.ID("workflow-name")),
		chromedp.SendKeys(chromedp.ID("workflow-name"), "shipping"), click("#workflow-go"), chromedp.WaitVisible(chromedp.ID("workflows")))
	list := b.text("workflows")
	for _, want := range []string{"shipping-o1", "shipping-o2", "carrier down", "Waiting"} {
		if !strings.Contains(list, want) {
			t.Fatalf("the list lacks %q:\n%s", want, list)
		}
	}
	b.shot("workflows")
	b.do("an instance", click(`tr[data-stream="shipping-o1"] a`), chromedp.WaitVisible(chromedp.ID("workflow-error")))
	if got := b.text("workflow-error"); !strings.Contains(got, "carrier down") || !strings.Contains(got, "Paid") {
		t.Fatalf("the instance's error: %q", got)
	}
	if got := b.text("workflow-timers"); !strings.Contains(got, "payment") {
		t.Fatalf("the instance's timers: %q", got)
	}
	b.do("retry", click("#workflow-retry"))
	b.until("the retry's notice", `document.querySelector("#flash") !== null`)
	if f := b.text("flash"); !strings.Contains(f, "apply its failed input again") {
		t.Fatalf("the notice says %q", f)
	}
	b.do("cancel", chromedp.SendKeys(chromedp.ID("cancel-reason"), "customer left"), click("#workflow-cancel"), chromedp.WaitVisible(chromedp.ID("confirm-name")),
		chromedp.SendKeys(chromedp.ID("confirm-name"), "shipping-o1"), click("#confirm-go"))
	b.until("the cancel's notice", `document.querySelector("#flash") !== null && document.querySelector("#flash").textContent.includes("Cancelled")`)
	if got := b.text("card-workflow-state"); !strings.Contains(got, "cancelled: customer left") {
		t.Fatalf("the state after the cancel: %q", got)
	}
	st, err := workflow.Inspect(ctx, store, "shipping-o1")
	if err != nil || !st.Cancelled || st.Reason != "customer left" || len(st.Pending) != 0 {
		t.Fatalf("the store's instance: %+v, %v", st, err)
	}

	ro := serve(t, store, server.Config{})
	b.signIn(ro)
	b.do("a read-only server's instance", chromedp.Navigate(ro.url+"/#/workflows/shipping/o2"), chromedp.WaitVisible(chromedp.ID("workflow-off")))
}
