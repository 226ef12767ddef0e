package soakweb

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/internal/browsertest"
)

// serve builds the module, serves it on loopback and returns its URL.
func serve(t *testing.T) (*Server, string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the module: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := Build(ctx, goTool, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(m)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = hs.Close()
		<-done
	})
	return srv, "http://" + ln.Addr().String() + "/"
}

// tab is a headless Chromium tab (internal/browsertest).
type tab struct {
	*browsertest.Tab
	t   *testing.T
	ctx context.Context
}

func newTab(t *testing.T) *tab {
	t.Helper()
	b := browsertest.Open(t, "run the browser soak in", 1000, 900)
	return &tab{Tab: b, t: t, ctx: b.Ctx}
}

func (b *tab) logged() []string { return b.Problems() }

// run opens url and waits up to limit for the module's result, which it
// returns as JSON.
func (b *tab) run(url string, limit time.Duration) string {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("open %s: %v", url, err)
	}
	var last string
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		got, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](
			"[JSON.stringify(window.varveSoakResult || null), JSON.stringify(window.varveSoakLast || null)]"))
		if err != nil {
			b.t.Fatalf("read the page: %v\nthe page logged: %v", err, b.logged())
		}
		if got[0] != "null" {
			return got[0]
		}
		last = got[1]
	}
	b.t.Fatalf("the run did not end within %v; last sample: %s\nthe page logged: %v", limit, last, b.logged())
	return ""
}

func (b *tab) eval(js string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v\nthe page logged: %v", js, err, b.logged())
	}
	return s
}

func (b *tab) text(id string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.ID(id)))
	if err != nil {
		b.t.Fatalf("text of #%s: %v", id, err)
	}
	return strings.TrimSpace(s)
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
}

func (b *tab) shot(name string) {
	b.t.Helper()
	dir := os.Getenv("VARVE_SCREENSHOTS")
	if dir == "" {
		dir = b.t.TempDir()
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 10_000 {
		b.t.Fatalf("screenshot %s: %d bytes, an empty page?", name, len(png))
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// moduleResult is the part of the module's result the test checks.
type moduleResult struct {
	Mode       string `json:"mode"`
	StopReason string `json:"stop_reason"`
	Error      string `json:"error"`
	FirstError string `json:"first_error"`
	Counts     struct {
		Ops        int64 `json:"ops"`
		Errors     int64 `json:"errors"`
		Appended   int64 `json:"events_appended"`
		Pruned     int64 `json:"streams_pruned"`
		LiveEvents int64 `json:"live_events"`
	} `json:"counts"`
	MemoryLimit int64  `json:"memory_limit"`
	Samples     int    `json:"samples"`
	PeakLive    uint64 `json:"peak_heap_live"`
	LiveAtPeak  int64  `json:"live_events_at_peak"`
	Last        struct {
		HeapLive   uint64  `json:"heap_live"`
		LiveEvents int64   `json:"live_events"`
		Ops        int64   `json:"ops"`
		Rate       float64 `json:"rate"`
	} `json:"last"`
	Verdict struct {
		Status string `json:"status"`
		Trends []struct {
			Name        string  `json:"name"`
			SlopePerMin float64 `json:"slope_bytes_per_min"`
			SlopeLow    float64 `json:"slope_low_bytes_per_min"`
			Pct         float64 `json:"pct_of_mean_per_10min"`
		} `json:"trends"`
	} `json:"verdict"`
}

// report waits for the server to hold the run's samples (posts may still
// be in flight when the result is read) and returns its report.
func report(t *testing.T, srv *Server, samples int) lab.SoakReport {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		rep, err := srv.Report(lab.SoakConfig{})
		if err == nil && len(rep.Samples) == samples {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's report holds %d samples (%v), the module reported %d", len(rep.Samples), err, samples)
		}
	}
}

func mib(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB" }

func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestBrowserSoak builds the module, serves the page and runs it in
// headless Chromium: a short sustained run ends flat with the page showing
// the figures the module reported, and a discovery run under a small
// memory limit ends with the ceiling on the page. Screenshots go to
// VARVE_SCREENSHOTS when set.
func TestBrowserSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module and runs it in Chromium")
	}
	srv, url := serve(t)
	b := newTab(t)

	// Sustained: 8 s sampled every 100 ms, judged on the second half (4 s)
	// against the smoke floor of the native soak's tests (64 MiB/min): a
	// slope projected over 10 minutes from seconds is noise below it.
	res := b.run(url+"?autostart=1&mode=sustained&duration=8&limit_mib=64&prune_above=500&rate=2000&workers=2&aggregates=200&interval_ms=100&min_slope=67108864&min_span_ms=1000", 40*time.Second)
	var sus moduleResult
	decode(t, res, &sus)
	if sus.Error != "" || sus.Counts.Errors != 0 {
		t.Fatalf("sustained run failed: %s %s (%d errors)", sus.Error, sus.FirstError, sus.Counts.Errors)
	}
	if sus.Counts.Ops == 0 || sus.Counts.Pruned == 0 || sus.StopReason != "duration reached" {
		t.Fatalf("sustained run did not run its course: %+v", sus)
	}
	if sus.Verdict.Status != "flat" {
		t.Fatalf("sustained run in the browser judged %q: %+v\nthe page logged: %v", sus.Verdict.Status, sus.Verdict, b.logged())
	}
	if sus.MemoryLimit != 64<<20 {
		t.Errorf("memory limit inside the module %d, want %d", sus.MemoryLimit, 64<<20)
	}
	for _, tr := range sus.Verdict.Trends {
		t.Logf("browser sustained: %s slope %.1f KiB/min; %d commands, %d live events at the end", tr.Name, tr.SlopePerMin/1024, sus.Counts.Ops, sus.Counts.LiveEvents)
	}
	if len(sus.Verdict.Trends) != 1 || sus.Verdict.Trends[0].Name != "heap_live" {
		t.Fatalf("the browser has a live heap and no RSS; trends %+v", sus.Verdict.Trends)
	}
	tr := sus.Verdict.Trends[0]
	for id, want := range map[string]string{
		"slope": fmt.Sprintf("%.1f KiB/min (95%%: %.1f to %.1f; %.2f%% of mean per 10 min)",
			tr.SlopePerMin/1024, tr.SlopeLow/1024, (2*tr.SlopePerMin-tr.SlopeLow)/1024, tr.Pct),
		"verdict":      "verdict: FLAT",
		"heap-live":    mib(sus.Last.HeapLive),
		"live-events":  grouped(sus.Last.LiveEvents),
		"ops":          grouped(sus.Last.Ops),
		"rate-now":     grouped(int64(sus.Last.Rate + 0.5)),
		"memory-limit": "64.0 MiB",
		"stop-reason":  "duration reached",
	} {
		if got := b.text(id); got != want {
			t.Errorf("#%s shows %q, the module reported %q", id, got, want)
		}
	}
	b.shot("soak-browser-sustained")

	// The server kept what the page posted and reports it as the native
	// soak does.
	sample, result, err := srv.Last()
	if err != nil || sample == nil || result == nil {
		t.Fatalf("the server kept sample %s, result %s: %v", sample, result, err)
	}
	var posted moduleResult
	if err := json.Unmarshal(result, &posted); err != nil || posted.Counts.Ops != sus.Counts.Ops {
		t.Fatalf("the posted result (%v) says %d commands, the module %d", err, posted.Counts.Ops, sus.Counts.Ops)
	}
	rep := report(t, srv, sus.Samples)
	if !strings.HasPrefix(rep.Environment, "browser (WebAssembly in HeadlessChrome/") || !strings.HasSuffix(rep.Environment, "memory backend, debug.SetMemoryLimit 64.0 MiB)") {
		t.Errorf("report's environment %q", rep.Environment)
	}
	if rep.Verdict.Status != sus.Verdict.Status || rep.Ops != sus.Counts.Ops || rep.LiveEvents != sus.Counts.LiveEvents ||
		rep.Pruned != sus.Counts.Pruned || rep.MemoryLimit != sus.MemoryLimit || rep.Mode != "sustained" || rep.Ended != "" || rep.StopReason != sus.StopReason {
		t.Errorf("the report says %s, %d commands, %d live events, %d pruned, limit %d, mode %s, stopped %q (ended %q); the module: %+v",
			rep.Verdict.Status, rep.Ops, rep.LiveEvents, rep.Pruned, rep.MemoryLimit, rep.Mode, rep.StopReason, rep.Ended, sus)
	}
	for i, tr := range rep.Verdict.Trends {
		if i >= len(sus.Verdict.Trends) || tr.SlopePerMin != sus.Verdict.Trends[i].SlopePerMin {
			t.Errorf("the report's trend %s %.1f B/min differs from the module's %+v", tr.Name, tr.SlopePerMin, sus.Verdict.Trends)
		}
	}
	if last := rep.Samples[len(rep.Samples)-1]; last.HeapLive != sus.Last.HeapLive || last.Ops != sus.Last.Ops {
		t.Errorf("the report's last sample %+v, the module's %+v", last, sus.Last)
	}
	var text strings.Builder
	if err := lab.PrintSoak(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`Environment +` + regexp.QuoteMeta(rep.Environment), `verdict: FLAT`, fmt.Sprintf(`Commands +%d \(`, sus.Counts.Ops)} {
		if !regexp.MustCompile(want).MatchString(text.String()) {
			t.Errorf("the report's table lacks %s:\n%s", want, text.String())
		}
	}

	// Discovery under 16 MiB: no pruning, the run stops when the live heap
	// reaches 90% of the limit, in seconds on a quiet machine. Its duration
	// is only a bound on a hang: with 30 s, a run starved beside a CPU hog
	// reached 13.4 of the 14.4 MiB and stopped at its duration.
	res = b.run(url+"?autostart=1&mode=discovery&duration=300&limit_mib=16&workers=2&aggregates=1000&interval_ms=100", 320*time.Second)
	var disc moduleResult
	decode(t, res, &disc)
	if disc.Error != "" || disc.Counts.Errors != 0 {
		t.Fatalf("discovery run failed: %s %s", disc.Error, disc.FirstError)
	}
	if !strings.Contains(disc.StopReason, "90% of the memory limit") || disc.Counts.Pruned != 0 {
		t.Fatalf("discovery did not stop at the ceiling: %+v", disc)
	}
	if disc.PeakLive < 16<<20*9/10 || disc.LiveAtPeak == 0 {
		t.Fatalf("discovery ceiling: live heap %d with %d events", disc.PeakLive, disc.LiveAtPeak)
	}
	want := "ceiling: live heap " + mib(disc.PeakLive) + " holding " + grouped(disc.LiveAtPeak) + " events (" + disc.StopReason + ")"
	if got := b.text("verdict"); got != want {
		t.Errorf("the page shows %q, the module reported %q", got, want)
	}
	if got := b.text("peak-live"); got != mib(disc.PeakLive) {
		t.Errorf("#peak-live shows %q, the module reported %q", got, mib(disc.PeakLive))
	}
	t.Logf("browser discovery at 16 MiB: ceiling %s live heap holding %d events, %d commands", mib(disc.PeakLive), disc.LiveAtPeak, disc.Counts.Ops)
	rep = report(t, srv, disc.Samples)
	if c := rep.Ceiling; rep.Mode != "discovery" || c == nil || c.LiveEvents != disc.Counts.LiveEvents || c.HeapLive != disc.Last.HeapLive ||
		rep.StopReason != disc.StopReason || rep.Pruned != 0 || len(rep.Samples) != disc.Samples {
		t.Errorf("the discovery report: mode %s, ceiling %+v, stopped %q, %d samples; the module: %+v", rep.Mode, c, rep.StopReason, len(rep.Samples), disc)
	}
	b.shot("soak-browser-discovery")
	if p := b.logged(); len(p) > 0 {
		t.Errorf("the page logged problems: %v", p)
	}
}
