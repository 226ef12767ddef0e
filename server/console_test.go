package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/internal/browsertest"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/server"
)

// browser is a headless Chromium tab (internal/browsertest) and where its
// screenshots go.
type browser struct {
	*browsertest.Tab
	t     *testing.T
	ctx   context.Context
	shots string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	tab := browsertest.Open(t, "drive the console with", 1280, 860)
	b := &browser{Tab: tab, t: t, ctx: tab.Ctx, shots: os.Getenv("VARVE_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = t.TempDir()
	}
	return b
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\nthe page logged: %v", what, err, b.logged())
	}
}

// text returns the text of the element with the id, as the page shows it.
func (b *browser) text(id string) string {
	b.t.Helper()
	sel, _ := json.Marshal("#" + id)
	// One evaluation finds the element and reads its text: the console
	// re-renders its views, and a node that one call found may be gone by
	// the next.
	s, err := chromedp.Run(b.ctx, chromedp.Poll[[]string](fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e === null ? null : [e.innerText] })()`, sel),
		chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil || len(s) != 1 {
		b.t.Fatalf("text of #%s: %v", id, err)
	}
	return s[0]
}

// click clicks the element sel (a CSS selector) in one evaluation of the
// page, once it exists, for the reason text reads in one.
func click(sel string) chromedp.Action[chromedp.Void] {
	js, _ := json.Marshal(sel)
	return chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (e === null) return false; e.click(); return true })()`, js),
		chromedp.WithPollingTimeout(60*time.Second))
}

// until waits for a JavaScript condition of the page.
func (b *browser) until(what, cond string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v\nthe page logged: %v", what, cond, err, b.logged())
	}
}

// shot saves a screenshot of the viewport as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 10_000 {
		b.t.Fatalf("screenshot %s: %d bytes, an empty page?", name, len(png))
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) logged() []string { return b.Problems() }

// signIn opens the console of a and signs in with the token: the
// dashboard shows.
func (b *browser) signIn(a *api) {
	b.t.Helper()
	b.do("sign in", chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), click("#signin"), chromedp.WaitVisible(chromedp.ID("dash-cards")))
}

// report is a page in the shape of the lab's HTML reports: inline style
// and SVG, no script.
const report = `<!doctype html><html><head><meta charset="utf-8"><title>varve bench: sqlite</title>
<style>body{font:14px sans-serif;margin:20px}h1{color:#2a6f97}</style></head><body>
<h1 id="report-title">varve bench: sqlite</h1><p>append-single: 1,234 events/s, ratio 0.91</p>
<svg width="300" height="120"><rect x="10" y="20" width="220" height="30" fill="#2a6f97"/><text x="12" y="80">append-single</text></svg>
</body></html>`

// TestConsole drives the console in headless Chromium: sign in, list and
// open a stream (data pretty-printed), follow $all while the test appends
// (a big event's preview bounded), page through a stream of big events,
// replay a parked event, show a lab report. It asserts on what each page
// shows and saves a screenshot of each (VARVE_SCREENSHOTS keeps them).
func TestConsole(t *testing.T) {
	b := newBrowser(t)
	store := teststore.Kinds[1].Open(t, varve.Config{}) // SQLite, the embedded default
	ctx := t.Context()
	for i, s := range []string{"order-1001", "order-1002", "order-1003", "customer-7", "invoice-2026-11"} {
		for v := range i%3 + 1 {
			data := fmt.Appendf(nil, `{"order":%q,"customer":"c-7","lines":[{"sku":"A-%d","qty":%d,"price":{"amount":%d.50,"currency":"EUR"}}],"gift":%v}`, s, v, v+1, 10+v, v == 0)
			if _, err := store.Append(ctx, s, varve.Exact(varve.Version(v)), varve.Event{Type: []string{"OrderPlaced", "OrderPaid", "OrderShipped"}[v], Data: data, Metadata: []byte(`{"trace":"4bf92f35","by":"checkout"}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	parked := park(t, store, "hooks", "payment-42", 2)
	projParked := park(t, store, "projection-totals-v1", "totals-poison", 1)
	if err := store.Checkpoints().Save(ctx, "hooks", parked[1].Position); err != nil {
		t.Fatal(err)
	}
	if err := store.Checkpoints().Save(ctx, "projector", varve.Position{Seq: 3}); err != nil {
		t.Fatal(err)
	}
	reports := t.TempDir()
	if err := os.WriteFile(filepath.Join(reports, "bench.html"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	sink := &recordingSink{}
	a := serve(t, store, server.Config{Writes: true, Name: "sqlite varve.db", Reports: os.DirFS(reports), MaxPageBytes: 1 << 20,
		Replay: func(sub string) delivery.Sink { return sink }})

	// Sign in; a wrong token is refused first.
	b.do("open the console", chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "not-the-token-0123456789"), click("#signin"))
	b.until("the refusal", `document.querySelector("[role=alert]") !== null`)
	if msg := b.text("login"); !strings.Contains(msg, "not the server's") {
		t.Fatalf("a wrong token: the page says %q", msg)
	}
	// The refused request is the one problem the page logged so far.
	if p := b.logged(); len(p) != 1 || !strings.Contains(p[0], "401") {
		t.Fatalf("the page logged %v", p)
	}
	b.Forget()
	// The form is new: its field is empty.
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), token),
		click("#signin"), chromedp.WaitVisible(chromedp.ID("dash-cards")),
		chromedp.Navigate(a.url+"/#/streams"), chromedp.WaitVisible(chromedp.ID("streams")))
	list := b.text("streams")
	for _, want := range []string{"order-1001", "order-1002", "invoice-2026-11", "customer-7", "live"} {
		if !strings.Contains(list, want) {
			t.Fatalf("the stream list lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, "$parked") {
		t.Fatalf("the stream list shows system streams without asking:\n%s", list)
	}
	if w := b.text("writes"); w != "writes enabled" {
		t.Fatalf("the header says %q", w)
	}
	b.do("filter by prefix", chromedp.SendKeys(chromedp.ID("prefix"), "order-"), click("#filter"))
	b.until("the filtered list", `!document.querySelector("#streams").innerText.includes("customer-7")`)
	b.shot("streams")

	// Open a stream: its info and its events, data pretty-printed.
	b.do("open a stream", click(`#streams a[href="#/stream/order-1003"]`), chromedp.WaitVisible(chromedp.ID("events")))
	if v := b.text("card-version"); v != "3" {
		t.Fatalf("the stream's version card says %q", v)
	}
	evs := b.text("events")
	for _, want := range []string{"OrderShipped", "OrderPaid", "OrderPlaced", `"currency": "EUR"`, `"amount": 12.5`, "\n  \"lines\": [\n"} {
		if !strings.Contains(evs, want) {
			t.Fatalf("the stream page lacks %q:\n%s", want, evs)
		}
	}
	if strings.Index(evs, "OrderShipped") > strings.Index(evs, "OrderPlaced") {
		t.Fatalf("newest first: OrderShipped should come before OrderPlaced:\n%s", evs)
	}
	b.shot("stream")

	// Follow $all while the test appends.
	b.do("follow $all", chromedp.Navigate(a.url+"/#/all"), chromedp.WaitVisible(chromedp.ID("tail")))
	b.until("the live tail", `document.querySelector("#tail-status").innerText === "live"`)
	var positions []string
	for i := range 4 {
		res, err := store.Append(ctx, "cart-88", varve.Exact(varve.Version(i)), varve.NewEvent("ItemAdded", fmt.Appendf(nil, `{"sku":"B-%d","qty":%d}`, i, i+1)))
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, res.Position.String())
	}
	b.until("the appended events", `document.querySelectorAll("#tail-rows tr").length === 4`)
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#tail-rows tr")].map(r => r.dataset.position)`))
	if err != nil {
		t.Fatal(err)
	}
	// The newest is on top.
	if fmt.Sprint(got) != fmt.Sprint([]string{positions[3], positions[2], positions[1], positions[0]}) {
		t.Fatalf("the live table shows positions %v, the appends were at %v", got, positions)
	}
	if rows := b.text("tail-rows"); !strings.Contains(rows, "cart-88") || !strings.Contains(rows, `{"sku":"B-3","qty":4}`) || b.text("tail-count") != "4" {
		t.Fatalf("the live table:\n%s", rows)
	}
	// A big event shows a bounded preview in the live view.
	big := fmt.Appendf(nil, `{"blob":%q}`, strings.Repeat("x", 700<<10))
	if _, err := store.Append(ctx, "cart-88", varve.Exact(4), varve.NewEvent("Blob", big)); err != nil {
		t.Fatal(err)
	}
	b.until("the big event", `document.querySelectorAll("#tail-rows tr").length === 5`)
	cell, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]int](`(() => { const c = document.querySelector("#tail-rows tr .preview"); return [c.textContent.length, c.title.length]; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if cell[0] > 200 || cell[1] > 200 || cell[0] < 100 {
		t.Fatalf("the preview of a 700 KiB event: %d characters of text, %d of title", cell[0], cell[1])
	}
	b.shot("all")

	// A stream of big events: pages within the server's MaxPageBytes, each
	// payload drawn only on demand.
	for v := range 3 {
		if _, err := store.Append(ctx, "blob-1", varve.Exact(varve.Version(v)), varve.NewEvent("Blob", big)); err != nil {
			t.Fatal(err)
		}
	}
	b.do("a stream of big events", chromedp.Navigate(a.url+"/#/stream/blob-1"), chromedp.WaitVisible(chromedp.ID("events")))
	shown, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]int](`[...document.querySelectorAll("#events article [data-part=data]")].map(p => p.textContent.length)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(shown) != 2 || shown[0] > 66<<10 || shown[1] > 66<<10 || !strings.Contains(b.text("events"), "large, drawn on demand") {
		t.Fatalf("the first page of big events shows payloads of %v characters", shown)
	}
	b.do("the older page", click("#more"))
	b.until("the last big event", `document.querySelectorAll("#events article").length === 1 && document.querySelector("#events article").dataset.version === "1"`)

	// Consumers, then replay one parked event.
	b.do("consumers", chromedp.Navigate(a.url+"/#/subscriptions"), chromedp.WaitVisible(chromedp.ID("subscriptions")))
	subs := b.text("subscriptions")
	for _, want := range []string{"hooks", "2 parked", "projector", "behind"} {
		if !strings.Contains(subs, want) {
			t.Fatalf("the consumers page lacks %q:\n%s", want, subs)
		}
	}
	b.shot("subscriptions")
	first := parked[0].Position.String()
	b.do("open hooks", click(`#subscriptions a[href="#/subscription/hooks"]`), chromedp.WaitVisible(chromedp.ID("parked")))
	if p := b.text("card-parked"); p != "2" {
		t.Fatalf("the parked card says %q", p)
	}
	b.do("select and replay", click(`#parked tr[data-position="`+first+`"] input`), click("#replay"))
	b.until("the replay's notice", `document.querySelector("#flash") !== null`)
	if f := b.text("flash"); f != "Replayed 1 parked event." {
		t.Fatalf("after the replay the page says %q", f)
	}
	if rows := b.text("parked"); strings.Contains(rows, "payment-42\t1\t") || !strings.Contains(rows, "payment-42") || b.text("card-parked") != "1" {
		t.Fatalf("after the replay the parked table shows:\n%s", rows)
	}
	if d := sink.deliveries(); len(d) != 1 || d[0].Event.ID != parked[0].EventID {
		t.Fatalf("the sink got %+v", d)
	}
	b.shot("parked")
	// A projection's parked event goes back through its runner: the
	// console asks for it.
	b.do("open a projection's version", chromedp.Navigate(a.url+"/#/subscription/projection-totals-v1"), chromedp.WaitVisible(chromedp.ID("parked")))
	b.do("select and replay through the runner", click(`#parked tr[data-position="`+projParked[0].Position.String()+`"] input`), click("#replay"))
	b.until("the replay request's notice", `document.querySelector("#flash") !== null`)
	if f := b.text("flash"); !strings.HasPrefix(f, "Replay requested") {
		t.Fatalf("after the projection's replay the page says %q", f)
	}
	if c, err := projection.ReadControl(ctx, store, "totals"); err != nil || c.Replays["projection-totals-v1"] == nil || !c.Replays["projection-totals-v1"].Pending {
		t.Fatalf("the projection's control stream: %+v %v, want a pending replay", c, err)
	}
	if d := sink.deliveries(); len(d) != 1 {
		t.Fatalf("the sink got %d deliveries, want the one of hooks alone", len(d))
	}

	// A lab report, in a sandboxed frame.
	b.do("reports", chromedp.Navigate(a.url+"/#/reports"), chromedp.WaitVisible(chromedp.ID("reports")),
		click(`#reports a`), chromedp.WaitVisible(chromedp.ID("report")))
	// The frame is sandboxed (an opaque origin, no script): the page
	// holds the report and its own styles apply, or the policy would have
	// logged a refusal, which the check at the end catches.
	attrs, err := chromedp.Run(b.ctx, chromedp.Attributes(chromedp.ID("report")))
	if err != nil {
		t.Fatal(err)
	}
	if sb, ok := attrs["sandbox"]; !ok || sb != "" || !strings.Contains(attrs["srcdoc"], `<h1 id="report-title">varve bench: sqlite</h1>`) {
		t.Fatalf("the report frame: sandbox %q (set: %v), srcdoc %.80q", sb, ok, attrs["srcdoc"])
	}
	b.shot("report")

	if p := b.logged(); len(p) > 0 {
		t.Fatalf("the console logged problems:\n%s", strings.Join(p, "\n"))
	}
	t.Logf("screenshots in %s", b.shots)
}
