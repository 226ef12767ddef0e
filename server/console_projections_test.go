package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/server"
)

// TestConsoleProjections drives the projections pages in headless Chromium
// beside live runners: the list, a projection's versions, pause and
// resume followed by the runner, a promotion behind a typed confirmation;
// the consumers page no longer lists the projections' bookkeeping; both
// say that the runners run (their heartbeats).
func TestConsoleProjections(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[1].Open(t, varve.Config{})
	ctx := t.Context()
	for i := range 6 {
		if _, err := store.Append(ctx, "order-"+string(rune('a'+i%3)), varve.Any, varve.NewEvent("OrderPlaced", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	run := func(version int, promote bool) *projection.Runner {
		r, err := projection.NewRunner(store, projection.Projection{Name: "totals", Version: version, Filter: varve.Filter{Categories: []string{"order"}},
			Handle: func(context.Context, projection.Batch) error { return nil }}, projection.Config{ControlPoll: 10 * time.Millisecond, Promote: promote})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("runner v%d: %v", version, err)
			}
		})
		<-r.Live()
		return r
	}
	v1 := run(1, true)
	run(2, false)
	// A projection that ran and stopped: its page says since when.
	archive, err := projection.NewRunner(store, projection.Projection{Name: "archive", Version: 1,
		Handle: func(context.Context, projection.Batch) error { return nil }}, projection.Config{ControlPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	actx, stopArchive := context.WithCancel(ctx)
	archived := make(chan error, 1)
	go func() { archived <- archive.Run(actx) }()
	<-archive.Live()
	stopArchive()
	if err := <-archived; err != nil {
		t.Fatal(err)
	}
	a := serve(t, store, server.Config{Writes: true})

	b.signIn(a)
	b.do("projections", chromedp.Navigate(a.url+"/#/projections"), chromedp.WaitVisible(chromedp.ID("projections")))
	if list := b.text("projections"); !strings.Contains(list, "totals") || !strings.Contains(list, "live") {
		t.Fatalf("the projections page shows:\n%s", list)
	}
	b.shot("projections")
	b.do("open totals", click(`#projections a[href="#/projection/totals"]`), chromedp.WaitVisible(chromedp.ID("versions")))
	if v := b.text("versions"); !strings.Contains(v, "current") || !strings.Contains(v, "2") || strings.Count(v, "running") != 2 {
		t.Fatalf("the versions table shows:\n%s", v)
	}

	// Pause and resume reach the runner through the control stream.
	b.do("pause", click("#pause"))
	b.until("the pause's notice", `document.querySelector("#flash") !== null && document.querySelector("#resume") !== null`)
	waitFor(t, "the runner paused", func() bool { return v1.Status().State == projection.Paused })
	b.do("resume", click("#resume"))
	b.until("the resume's notice", `document.querySelector("#pause") !== null`)
	waitFor(t, "the runner live again", func() bool { return v1.Status().State == projection.Live })

	// A promotion asks for the projection's name, typed.
	b.do("make version 2 current", click(`#versions tr[data-version="2"] button[data-act=promote]`), chromedp.WaitVisible(chromedp.ID("confirm-name")))
	b.do("a wrong name", chromedp.SendKeys(chromedp.ID("confirm-name"), "total"))
	b.until("the button still disabled", `document.querySelector("#confirm-go").disabled`)
	b.do("the right name", chromedp.SendKeys(chromedp.ID("confirm-name"), "s"))
	b.until("the button enabled", `!document.querySelector("#confirm-go").disabled`)
	b.do("confirm", click("#confirm-go"))
	b.until("the promotion's notice", `document.querySelector("#flash") !== null && document.querySelector("#flash").textContent === "Promote of version 2 requested."`)
	if cur, ok, err := projection.Current(ctx, store, "totals"); err != nil || !ok || cur != 2 {
		t.Fatalf("current version %d (%v, %v), want 2", cur, ok, err)
	}
	b.shot("projection")

	// The consumers page lists the versions' checkpoints, not their origins.
	b.do("consumers", chromedp.Navigate(a.url+"/#/subscriptions"), chromedp.WaitVisible(chromedp.ID("subscriptions")))
	if subs := b.text("subscriptions"); !strings.Contains(subs, "projection-totals-v1") || strings.Contains(subs, "-origin") || !strings.Contains(subs, "running") {
		t.Fatalf("the consumers page shows:\n%s", subs)
	}
	b.do("the stopped projection", chromedp.Navigate(a.url+"/#/projection/archive"), chromedp.WaitVisible(chromedp.ID("versions")))
	if v := b.text("versions"); !strings.Contains(v, "stopped since") {
		t.Fatalf("the stopped projection's versions show:\n%s", v)
	}
}

// waitFor polls cond until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
