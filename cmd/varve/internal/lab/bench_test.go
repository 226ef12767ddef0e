package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/testenv"
	"github.com/varve-go/varve/internal/workload"
)

// targets resolves store URLs for a run, and releases them at the end of
// the test.
func targets(t testing.TB, urls ...string) []*Target {
	t.Helper()
	var out []*Target
	for _, u := range urls {
		tg, err := Resolve(u, NewRunID("test"), ForRun)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := tg.Release(context.Background()); err != nil {
				t.Errorf("release %s: %v", tg.Label, err)
			}
		})
		out = append(out, tg)
	}
	UniqueLabels(out)
	return out
}

func TestBenchSideBySide(t *testing.T) {
	names := []string{"append-single", "load-10", "mixed-80r20w", "stream-info"}
	var progress bytes.Buffer
	rep, err := Bench(t.Context(), BenchConfig{
		Stores: targets(t, "memory:", "mem:"), Workloads: names, Events: 200, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Interrupted || len(rep.Stores) != 2 || len(rep.Workloads) != len(names) || rep.Machine.Cores == 0 {
		t.Fatalf("report: interrupted %v, %d stores, %d workloads, machine %+v", rep.Interrupted, len(rep.Stores), len(rep.Workloads), rep.Machine)
	}
	for _, st := range rep.Stores {
		if st.Backend != "memory" || st.Error != "" {
			t.Fatalf("store %s: backend %q, error %q", st.Name, st.Backend, st.Error)
		}
		if b := st.Baseline; b == nil || len(b.Runs) != 2 || b.EventsPerSec <= 0 || b.Name != "mutex+slice" {
			t.Fatalf("store %s: baseline %+v, want two runs", st.Name, b)
		}
		if len(st.Results) != len(names) {
			t.Fatalf("store %s: %d results, want %d", st.Name, len(st.Results), len(names))
		}
		for i, r := range st.Results {
			if r.Workload != names[i] || r.Error != "" || r.Stopped != workload.StopBudget {
				t.Fatalf("store %s result %d: %+v", st.Name, i, r)
			}
			// Only workloads that write get a ratio to the write baseline.
			if Writes(r.Workload) != (r.VsBaseline != nil && r.VsBaseline.Throughput > 0) {
				t.Fatalf("store %s result %s: ratio %+v", st.Name, r.Workload, r.VsBaseline)
			}
		}
	}
	if r := rep.Stores[0].Results[0]; r.Events != 200 || r.Ops != 200 {
		t.Fatalf("append-single moved %d events in %d ops, want 200 in 200", r.Events, r.Ops)
	}
	if r := rep.Stores[0].Results[1]; r.Events != 200 || r.Ops != 20 {
		t.Fatalf("load-10 moved %d events in %d ops, want 200 in 20", r.Events, r.Ops)
	}
	for _, want := range []string{"memory #1 baseline before:", "memory #2 load-10: 200 events in", "memory #2 baseline after:"} {
		if !strings.Contains(progress.String(), want) {
			t.Fatalf("progress lacks %q:\n%s", want, progress.String())
		}
	}

	var text bytes.Buffer
	if err := PrintBench(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range append([]string{"baselines:", "mutex+slice", "EVENTS/S", "OPS/S", "vs BASE", "ALLOCS/OP", "(read)", "P90", "MAX"}, names...) {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("text report lacks %q:\n%s", want, text.String())
		}
	}

	var page bytes.Buffer
	if err := WriteBenchHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, page.String())
	// Every workload has a latency-over-time chart, however short its run.
	if n := strings.Count(page.String(), "<svg"); n != 1+2*len(names) {
		t.Fatalf("report has %d charts, want a throughput chart and %d latency and timeline charts", n, 2*len(names))
	}
}

// checkSelfContained fails unless page loads nothing: no script, no
// external resource, and every URL in it is the SVG namespace.
func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"<script", "src=", "href=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Fatalf("HTML report contains %q", bad)
		}
	}
	rest := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	if strings.Contains(rest, "http://") || strings.Contains(rest, "https://") {
		t.Fatal("HTML report names a URL")
	}
	if strings.Contains(page, "ZgotmplZ") {
		t.Fatal("html/template rejected a value in the report")
	}
}

func TestBenchInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel)
	rep, err := Bench(ctx, BenchConfig{
		Stores: targets(t, "memory:", "memory:"), Workloads: []string{"concurrent-8", "load-10"},
		Events: 1 << 30, Duration: -1,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want one that wraps context.Canceled", err)
	}
	if rep == nil || !rep.Interrupted || len(rep.Stores) != 1 {
		t.Fatalf("report %+v, want an interrupted report of the first store", rep)
	}
	st := rep.Stores[0]
	if len(st.Baseline.Runs) > 1 {
		t.Fatalf("%d baseline runs after an interruption", len(st.Baseline.Runs))
	}
	if len(st.Results) > 0 {
		if r := st.Results[0]; r.Stopped != workload.StopInterrupted || r.Ops == 0 {
			t.Fatalf("interrupted result: %+v", r)
		}
	}
	var text bytes.Buffer
	if err := PrintBench(&text, rep); err != nil || !strings.Contains(text.String(), "INTERRUPTED") {
		t.Fatalf("text report of an interrupted run (error %v):\n%s", err, text.String())
	}
}

func TestBenchBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  BenchConfig
		want string
	}{
		{"no store", BenchConfig{}, "no store"},
		{"unknown workload", BenchConfig{Stores: targets(t, "memory:"), Workloads: []string{"append-everything"}}, `workload "append-everything"`},
		{"negative events", BenchConfig{Stores: targets(t, "memory:"), Events: -1}, "-1 events"},
		{"negative rate", BenchConfig{Stores: targets(t, "memory:"), Rate: -1}, "rate -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Bench(t.Context(), tc.cfg)
			if rep != nil || !errors.Is(err, varve.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got report %v, error %v; want no report and an invalid-argument error with %q", rep != nil, err, tc.want)
			}
		})
	}
}

func TestBaselines(t *testing.T) {
	tests := []struct {
		scheme  string
		url     func(t testing.TB) string
		name    string
		version string
	}{
		{"memory", func(testing.TB) string { return "memory:" }, "mutex+slice", ""},
		{"sqlite", func(t testing.TB) string { return "sqlite://" + t.TempDir() + "/store.db" }, "bare INSERT", "SQLite 3."},
		{"postgres", testenv.PostgresURL, "bare INSERT", "PostgreSQL "},
		{"postgres-with-varve-params", func(t testing.TB) string {
			return testenv.PostgresURL(t) + "&varve_schema=varve_lab_test&varve_max_conns=2"
		}, "bare INSERT", "PostgreSQL "},
		{"nats", testenv.NATSURL, "raw publish", "NATS "},
	}
	for _, tc := range tests {
		t.Run(tc.scheme, func(t *testing.T) {
			raw := tc.url(t)
			ctx := t.Context()
			bl, err := openBaseline(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Measure(ctx, 1, bl.newOp, Limits{Ops: 50}, nil)
			if cerr := bl.close(ctx); cerr != nil {
				t.Errorf("close: %v", cerr)
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Events != 50 || bl.name != tc.name || !strings.HasPrefix(bl.version, tc.version) {
				t.Fatalf("%d events, name %q, version %q; want 50, %q, %q...", res.Events, bl.name, bl.version, tc.name, tc.version)
			}
			if tc.scheme == "sqlite" {
				path, _ := sqlitePath(raw)
				left, _ := os.ReadDir(filepath.Dir(path))
				if len(left) != 0 {
					t.Fatalf("the sqlite baseline left %d files behind, first %s", len(left), left[0].Name())
				}
			}
		})
	}
	if _, err := openBaseline(t.Context(), "redis://127.0.0.1"); !errors.Is(err, errNoBaseline) {
		t.Fatalf("unknown scheme: %v", err)
	}
}

// readWorkloads are the workloads that are not writes alone: they read,
// or read before they write, and get no ratio to the write baseline.
var readWorkloads = []string{"load-10", "load-100", "load-1000", "mixed-80r20w", "mixed-20r80w", "stream-info", "last-position", "scale-load",
	"filter-category", "filter-category-client", "filter-stream", "filter-all-same-size",
	"scale-filter-category", "scale-filter-category-client", "scale-filter-stream", "scale-filter-all-same-size",
	"command-direct", "command-bus"}

// TestWorkloadKinds: every workload is known to write or to read, so that
// none gets a ratio to the write baseline by accident.
func TestWorkloadKinds(t *testing.T) {
	for _, w := range workload.All() {
		writes, reads := slices.Contains(writeWorkloads, w.Name), slices.Contains(readWorkloads, w.Name)
		if writes == reads {
			t.Errorf("workload %s: in the write list %v, in the read list %v; want exactly one", w.Name, writes, reads)
		}
	}
	if n := len(writeWorkloads) + len(readWorkloads); n != len(workload.All()) {
		t.Errorf("%d workloads classified, %d exist", n, len(workload.All()))
	}
}

func TestSQLitePath(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"sqlite:///var/lib/varve/events.db", "/var/lib/varve/events.db"},
		{"sqlite://localhost/tmp/e.db", "/tmp/e.db"},
		{"sqlite:events.db", "events.db"},
		{"sqlite://data/events.db", "data/events.db"},
		{"sqlite:///tmp/e.db?cache=2000", "/tmp/e.db"},
	}
	for _, tc := range tests {
		if got, err := sqlitePath(tc.raw); err != nil || got != tc.want {
			t.Errorf("sqlitePath(%q) = %q, %v; want %q", tc.raw, got, err, tc.want)
		}
	}
	if _, err := sqlitePath("sqlite://"); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Errorf("sqlite:// without a file: %v", err)
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{GroupDigits(0), "0"},
		{GroupDigits(999.6), "1,000"},
		{GroupDigits(1234567), "1,234,567"},
		{GroupDigits(-1234), "-1,234"},
		{fmtRatio(0), "-"},
		{fmtRatio(0.0042), "0.0042x"},
		{fmtRatio(0.234), "0.23x"},
		{fmtRatio(4.26), "4.3x"},
		{fmtRatio(57.4), "57x"},
		{fmtDur(0), "-"},
		{fmtDur(81264639), "81.3ms"},
		{siRate(950), "950"},
		{siRate(12_000), "12k"},
		{siRate(3_400_000), "3.4M"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestTimelineChart draws the latency-over-time chart from a report with
// timelines, which the tiny runs of the other tests do not produce.
func TestTimelineChart(t *testing.T) {
	var tl []Point
	for i := range 40 {
		tl = append(tl, Point{At: time.Duration(i+1) * TimelineStep, Ops: 1000, Events: 1000,
			P50: time.Duration(300+i) * time.Nanosecond, P99: time.Duration(2000+100*i) * time.Nanosecond, Max: time.Millisecond})
	}
	res := Result{Ops: 40_000, Events: 40_000, Elapsed: 10 * time.Second, EventsPerSec: 4000,
		Latency: Latency{P50: 310, P90: 900, P99: 3000, P999: 9000, Max: time.Millisecond}, Timeline: tl}
	rep := &BenchReport{
		Started:   time.Now(),
		Workloads: []BenchWorkload{{Name: "scale-append", About: "test", Workers: 1, Unit: workload.Events, Scale: true}},
		Stores: []BenchStore{{Name: "memory", URL: "memory:", Backend: "memory", Results: []BenchResult{{Workload: "scale-append", Result: res}},
			Baseline: &BenchBaseline{Name: "mutex+slice", Runs: []Result{res}, EventsPerSec: 8000}}},
	}
	chart := string(timelineChart(rep, rep.Workloads[0]))
	if strings.Count(chart, "<polyline") != 2 || !strings.Contains(chart, "p99 solid") {
		t.Fatalf("timeline chart without its two lines:\n%s", chart)
	}
	var page bytes.Buffer
	if err := WriteBenchHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, page.String())
	if !strings.Contains(page.String(), "Latency over time") {
		t.Fatal("report lacks the latency-over-time section")
	}
}

// TestConcurrentBaseline: on PostgreSQL the workloads of 8 writers get
// their ratio from the 8-connection baseline, the others from the
// one-writer baseline; other stores have no concurrent baseline.
func TestConcurrentBaseline(t *testing.T) {
	names := []string{"append-single", "concurrent-8"}
	rep, err := Bench(t.Context(), BenchConfig{
		Stores: targets(t, testenv.PostgresURL(t), "memory:"), Workloads: names, Events: 80, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	pg, mem := rep.Stores[0], rep.Stores[1]
	if mem.Concurrent != nil {
		t.Fatalf("memory has a concurrent baseline: %+v", mem.Concurrent)
	}
	c, b := pg.Concurrent, pg.Baseline
	if c == nil || c.Workers != 8 || len(c.Runs) != 2 || c.EventsPerSec <= 0 || b == nil || b.EventsPerSec <= 0 {
		t.Fatalf("postgres baselines: %+v, concurrent %+v", b, c)
	}
	for _, r := range pg.Results {
		want := b.EventsPerSec
		if r.Workload == "concurrent-8" {
			want = c.EventsPerSec
		}
		if r.Error != "" || r.VsBaseline == nil || math.Abs(r.VsBaseline.Throughput*want-r.Rate(workload.Events)) > 1e-6*r.Rate(workload.Events) {
			t.Fatalf("%s: error %q, ratio %+v, want its rate %g over %g", r.Workload, r.Error, r.VsBaseline, r.Rate(workload.Events), want)
		}
	}
}

// TestBenchStorage: a storage workload reports the store's growth on disk
// per event, settled as the backend allows. The memory backend's Size
// counts event data only, so its figure is the payload's 100 bytes exactly;
// a durable store keeps more than the data of each event, and less than
// the 8 KiB page that a figure sized before its writes landed would show.
func TestBenchStorage(t *testing.T) {
	names := []string{"storage-single", "storage-batch10"}
	rep, err := Bench(t.Context(), BenchConfig{
		Stores:    targets(t, "memory:", "sqlite://"+t.TempDir()+"/store.db", testenv.PostgresURL(t), testenv.NATSURL(t)),
		Workloads: names, Events: 2000, Duration: -1, Progress: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	settle := map[string]string{"memory": "", "sqlite": "PRAGMA wal_checkpoint(TRUNCATE)", "postgres": "VACUUM (ANALYZE)", "nats": ""}
	for _, st := range rep.Stores {
		if len(st.Results) != len(names) {
			t.Fatalf("store %s: %d results, want %d", st.Name, len(st.Results), len(names))
		}
		for _, r := range st.Results {
			b := r.Bytes
			if r.Error != "" || b == nil || r.Events != 2000 {
				t.Fatalf("store %s %s: %d events, error %q, bytes %+v", st.Name, r.Workload, r.Events, r.Error, b)
			}
			if b.Settle != settle[st.Backend] || b.PerEvent != float64(b.After-b.Before)/2000 {
				t.Fatalf("store %s %s: bytes %+v, want settled by %q", st.Name, r.Workload, b, settle[st.Backend])
			}
			switch {
			case st.Backend == "memory" && b.PerEvent != 100:
				t.Fatalf("memory %s: %g bytes an event, want the 100 of its data", r.Workload, b.PerEvent)
			case st.Backend != "memory" && (b.PerEvent <= 100 || b.PerEvent >= 8192):
				t.Fatalf("store %s %s: %g bytes an event, want more than its 100 bytes of data and less than a page", st.Name, r.Workload, b.PerEvent)
			}
		}
	}
	var text bytes.Buffer
	if err := PrintBench(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DISK B/EVENT", "VACUUM (ANALYZE)", "100.0"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("text report lacks %q:\n%s", want, text.String())
		}
	}
	rows, err := json.Marshal(rep.Rows())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rows), `"per_event":100`) {
		t.Fatalf("rows lack the bytes per event: %s", rows)
	}
}

// TestBenchNoBytes: the other workloads report no bytes.
func TestBenchNoBytes(t *testing.T) {
	rep, err := Bench(t.Context(), BenchConfig{Stores: targets(t, "memory:"), Workloads: []string{"append-single"}, Events: 50, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Stores[0].Results[0]; r.Bytes != nil {
		t.Fatalf("append-single reports bytes: %+v", r.Bytes)
	}
}
