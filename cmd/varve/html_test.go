package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve/internal/browsertest"
)

func chromium(t *testing.T) string {
	t.Helper()
	return browsertest.Chromium(t, "render the HTML reports with")
}

// render loads page in headless Chromium, saves a screenshot beside it and
// returns the DOM as Chromium parsed it and what Chromium logged.
func render(t *testing.T, browser, page string) (dom, log string) {
	t.Helper()
	profile := t.TempDir()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile,
		"--enable-logging=stderr", "--v=0", "--hide-scrollbars"}
	run := func(args ...string) (string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, browser, append(append([]string{}, base...), args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	url := "file://" + page
	shot := strings.TrimSuffix(page, ".html") + ".png"
	_, log1 := run("--screenshot="+shot, "--window-size=1400,1000", url)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Fatalf("no screenshot of %s (%v):\n%s", page, err, log1)
	}
	dom, log2 := run("--dump-dom", url)
	return dom, log1 + log2
}

// consoleProblem matches what Chromium logs for a page that does not load
// cleanly: console errors, uncaught exceptions, resources it failed to
// load.
var consoleProblem = regexp.MustCompile(`(?i):CONSOLE[:(]|Uncaught|Failed to load resource|net::ERR_`)

// TestHTMLReportsRender writes the HTML report of every command with tiny
// budgets and renders each in headless Chromium: it must load without a
// console error, and Chromium must find every chart in it. The screenshots
// are kept in VARVE_SCREENSHOTS when that names a directory.
func TestHTMLReportsRender(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	if keep := os.Getenv("VARVE_SCREENSHOTS"); keep != "" {
		dir = keep
	}
	// The check itself: a page that logs an error is caught.
	bad := filepath.Join(t.TempDir(), "bad.html")
	if err := os.WriteFile(bad, []byte(`<html><body><p>`+strings.Repeat("x ", 5000)+`</p><script>console.error("boom")</script></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, log := render(t, browser, bad); !consoleProblem.MatchString(log) {
		t.Fatalf("a console error went unnoticed; chromium logged:\n%s", log)
	}
	reports := []struct {
		name string
		args []string
	}{
		{"bench", []string{"bench", "--store", "sqlite", "--store", "memory", "--workload", "append-single", "--workload", "load-10",
			"--workload", "mixed-80r20w", "--events", "400", "--duration", "2s"}},
		{"loadtest", []string{"loadtest", "--store", "memory", "--store", "sqlite", "-n", "400", "-u", "10", "-b", "50"}},
		{"deliver-bench", []string{"deliver-bench", "--store", "memory", "-t", "40", "-e", "2", "--streams", "8", "-l", "1,3",
			"-w", "1,2,5", "--sink", "http,func,raw-http"}},
		{"matrix", []string{"matrix", "--store", "memory", "--streams", "100", "--workers", "1,2,4", "--mix", "90/10,50/50", "--duration", "40ms"}},
		{"soak", []string{"soak", "--store", "memory", "--duration", "600ms", "--interval", "50ms", "--aggregates", "20"}},
	}
	for _, rep := range reports {
		t.Run(rep.name, func(t *testing.T) {
			page := filepath.Join(dir, rep.name+".html")
			r := runIn(t, append(rep.args, "--html", page)...)
			if r.code != exitOK {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			src, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"<script", "src=", "href=", "@import", "url(", "ZgotmplZ"} {
				if strings.Contains(string(src), bad) {
					t.Fatalf("the report contains %q: it must load nothing and run nothing", bad)
				}
			}
			dom, log := render(t, browser, page)
			for _, line := range strings.Split(log, "\n") {
				if consoleProblem.MatchString(line) {
					t.Errorf("chromium: %s", line)
				}
			}
			if want, got := strings.Count(string(src), "<svg"), strings.Count(dom, "<svg"); got != want || !strings.Contains(dom, "</html>") {
				t.Fatalf("chromium's DOM has %d charts, the file %d", got, want)
			}
			if !strings.Contains(dom, "<svg") {
				t.Fatal("the report has no chart")
			}
		})
	}
}
