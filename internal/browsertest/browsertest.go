// Package browsertest gives tests a headless Chromium: Debian's browser,
// installed by scripts/chromium.sh when it is missing under CI, and a tab
// that collects what its pages log as problems. Only tests import it.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Chromium returns the path of the headless browser. Under CI=true a
// missing browser is installed with scripts/chromium.sh, and a failure to
// install it fails the test; without CI it skips the test, loudly, saying
// what the browser was for.
func Chromium(t testing.TB, purpose string) string {
	t.Helper()
	find := func() string {
		for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(b); err == nil {
				return p
			}
		}
		return ""
	}
	if p := find(); p != "" {
		return p
	}
	if os.Getenv("CI") == "true" {
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "chromium.sh")
		out, err := exec.Command("bash", script).CombinedOutput()
		if p := find(); p != "" {
			return p
		}
		t.Fatalf("CI=true and no chromium: scripts/chromium.sh could not install it (%v):\n%s", err, out)
	}
	t.Skipf("SKIPPED LOUDLY: no chromium to %s; run scripts/chromium.sh (or make services) to install Debian's package", purpose)
	return ""
}

// Tab is a headless Chromium tab and what its pages logged as problems:
// uncaught exceptions, console errors, log entries of level error (policy
// violations, failed loads). Its context ends when the test ends, or
// after the time [OpenFor] was given.
type Tab struct {
	Ctx      context.Context
	mu       sync.Mutex
	problems []string
}

// Open starts Chromium with a window of width x height and a profile of
// its own, removed when the test ends; extra adds flags (a renderer's
// memory cap, for one). The tab's context ends after 3 minutes.
func Open(t testing.TB, purpose string, width, height int, extra ...chromedp.ExecAllocatorOption) *Tab {
	t.Helper()
	return OpenFor(t, purpose, width, height, 3*time.Minute, extra...)
}

// OpenFor is [Open] with a tab whose context ends after limit.
func OpenFor(t testing.TB, purpose string, width, height int, limit time.Duration, extra ...chromedp.ExecAllocatorOption) *Tab {
	t.Helper()
	exe := Chromium(t, purpose)
	profile, err := os.MkdirTemp("", "varve-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 { // Chromium's children may still write there for a moment.
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(profile), chromedp.WindowSize(width, height), chromedp.Flag("hide-scrollbars", true))
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, limit)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	b := &Tab{Ctx: ctx}
	err = chromedp.Listen(ctx, func(ev any) {
		var p string
		switch e := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			p = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				p += " " + e.ExceptionDetails.Exception.Description
			}
		case *cdpruntime.EventConsoleAPICalled:
			if e.Type == cdpruntime.ConsoleAPICalledTypeError {
				p = "console.error"
				for _, a := range e.Args {
					p += fmt.Sprintf(" %s", a.Value)
				}
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				p = "log: " + e.Entry.Text + " " + e.Entry.URL
			}
		}
		if p != "" {
			b.mu.Lock()
			b.problems = append(b.problems, p)
			b.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, struct{}{}); err != nil {
		t.Fatalf("start chromium (%s): %v", exe, err)
	}
	return b
}

// Problems returns what the tab's pages logged as problems so far.
func (b *Tab) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Forget drops the problems logged so far, for a test that expected them.
func (b *Tab) Forget() {
	b.mu.Lock()
	b.problems = nil
	b.mu.Unlock()
}
