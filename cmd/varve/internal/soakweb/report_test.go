package soakweb

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
)

// The report from what the page posted, for each way a run ends: its
// result, the module's exit, or nothing more (the tab died). Posts of an
// older run are dropped, a newer run drops the older one's.
func TestReportEndings(t *testing.T) {
	start := `{"mode":"discovery","duration_ms":60000,"prune_above":20000,"workers":2,"rate":0,"threshold_pct":1,"min_slope_bytes_per_min":16384,"min_span_ms":60000}`
	samples := []string{
		`{"memory_limit":0,"mem":{"at_ns":0,"heap_live":1048576,"ops":0},"counts":{}}`,
		`{"memory_limit":0,"mem":{"at_ns":1000000000,"heap_live":10485760,"heap_alloc":20971520,"sys":41943040,"ops":5000},"counts":{"ops":5000,"events_appended":5000,"live_events":5000}}`,
		`{"memory_limit":0,"mem":{"at_ns":2000000000,"heap_live":20971520,"heap_alloc":31457280,"sys":52428800,"ops":9000},"counts":{"ops":9000,"events_appended":9000,"live_events":9000}}`,
	}
	cases := []struct {
		name      string
		last      [2]string // a final post: path and body
		ended     string
		stop      string
		done      bool
		liveAtEnd int64
	}{
		{"result", [2]string{"result", `{"mode":"discovery","stop_reason":"duration reached","elapsed_ms":2100,"counts":{"ops":9100,"live_events":9100}}`}, "", "duration reached", true, 9100},
		{"module exited", [2]string{"end", `{"exit_code":2,"fatal":"fatal error: out of memory"}`}, EndedAllocation, "the module exited with code 2: fatal error: out of memory", true, 9000},
		{"tab died", [2]string{}, EndedTab, "no result and no exit from the page", false, 9000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := NewServer(Module{})
			post := func(path, body string) {
				t.Helper()
				req := httptest.NewRequest(http.MethodPost, "/report/"+path, strings.NewReader(body))
				req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36")
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != http.StatusNoContent {
					t.Fatalf("POST %s: %d %s", path, w.Code, w.Body)
				}
			}
			post("sample?run=1", `{"memory_limit":0,"mem":{"at_ns":5000000000,"heap_live":999,"ops":1},"counts":{"ops":1}}`)
			post("start?run=2", start)
			for _, s := range []int{0, 2, 1} { // out of order, as concurrent posts may land
				post("sample?run=2", samples[s])
			}
			post("sample?run=1", `{"memory_limit":0,"mem":{"at_ns":7000000000,"heap_live":999,"ops":1},"counts":{"ops":1}}`)
			if tc.last[0] != "" {
				post(tc.last[0]+"?run=2", tc.last[1])
			}
			select {
			case <-srv.Done():
				if !tc.done {
					t.Error("done without a result or an end")
				}
			default:
				if tc.done {
					t.Error("not done after the page's last post")
				}
			}
			if q := srv.Quiet(); q <= 0 || q > time.Minute {
				t.Errorf("quiet for %v right after a post", q)
			}
			rep, err := srv.Report(lab.SoakConfig{Mode: "sustained"})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Ended != tc.ended || !strings.HasPrefix(rep.StopReason, tc.stop) || rep.Mode != "discovery" || rep.Duration != time.Minute || rep.Workers != 2 {
				t.Errorf("ended %q, stopped %q, mode %s, duration %v, %d workers", rep.Ended, rep.StopReason, rep.Mode, rep.Duration, rep.Workers)
			}
			if rep.Environment != "browser (WebAssembly in HeadlessChrome/156.0.0.0, memory backend, no memory limit)" {
				t.Errorf("environment %q", rep.Environment)
			}
			if len(rep.Samples) != 3 || rep.Samples[2].HeapLive != 20971520 {
				t.Fatalf("samples %+v", rep.Samples)
			}
			c := rep.Ceiling
			if c == nil || c.HeapLive != 20971520 || c.LiveEvents != tc.liveAtEnd || c.Rate != 4000 || c.At != 2*time.Second {
				t.Errorf("ceiling %+v", c)
			}
			if rep.Verdict.Status != lab.Insufficient {
				t.Errorf("verdict of 2 s: %s", rep.Verdict.Status)
			}
		})
	}
	if _, err := NewServer(Module{}).Report(lab.SoakConfig{}); err != ErrNothingYet {
		t.Errorf("report before any post: %v", err)
	}
}
