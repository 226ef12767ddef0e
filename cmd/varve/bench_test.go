package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/varve-go/varve/lab"
	"github.com/varve-go/varve/lab/workload"
)

// runBench runs `varve bench` with args and returns stdout, stderr and the
// command's error.
func runBench(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := rootCmd()
	cmd.SetArgs(append([]string{"bench"}, args...))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestBenchCommand runs the whole suite through the CLI on a tiny budget,
// on memory and on SQLite, and checks the shape of
// the JSON; no figure is asserted.
func TestBenchCommand(t *testing.T) {
	defer goleak.VerifyNone(t)
	stores := []struct{ backend, url string }{
		{"memory", "memory:"},
		{"sqlite", "sqlite://" + t.TempDir() + "/bench.db"},
	}
	for _, st := range stores {
		t.Run(st.backend, func(t *testing.T) {
			b, err := lab.OpenBackend(t.Context(), st.url)
			if err != nil {
				t.Fatalf("open %s: %v", st.url, err)
			}
			_ = b.Close()
			html := filepath.Join(t.TempDir(), "report.html")
			out, progress, err := runBench(t, "--store", st.url, "--events", "300", "--json", "--html", html)
			if err != nil {
				t.Fatalf("varve bench: %v\n%s", err, progress)
			}
			checkReportShape(t, out, st.backend)
			if !strings.Contains(progress, "baseline before") || !strings.Contains(progress, "wrote "+html) {
				t.Fatalf("stderr lacks the progress and the report's name:\n%s", progress)
			}
			page, err := os.ReadFile(html)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(page), "<svg") || strings.Contains(string(page), "<script") {
				t.Fatal("the HTML report has no inline chart, or a script")
			}
		})
	}
}

func checkReportShape(t *testing.T, out, backend string) {
	t.Helper()
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json printed no JSON object: %v\n%s", err, out)
	}
	want := func(obj map[string]any, where string, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if _, ok := obj[k]; !ok {
				t.Fatalf("%s lacks %q: %v", where, k, obj)
			}
		}
	}
	want(rep, "report", "varve_version", "machine", "gomaxprocs", "started", "finished", "interrupted", "events", "duration_ns", "workloads", "stores")
	machine := rep["machine"].(map[string]any)
	want(machine, "machine", "cpu", "cores", "go_version", "os", "arch")
	if machine["cores"].(float64) < 1 || !strings.HasPrefix(machine["go_version"].(string), "go") {
		t.Fatalf("machine info: %v", machine)
	}
	if len(rep["workloads"].([]any)) != len(workload.Suite()) {
		t.Fatalf("%d workloads, want the suite's %d", len(rep["workloads"].([]any)), len(workload.Suite()))
	}
	stores := rep["stores"].([]any)
	if len(stores) != 1 {
		t.Fatalf("%d stores, want 1", len(stores))
	}
	st := stores[0].(map[string]any)
	want(st, "store", "url", "backend", "server_version", "features", "baseline", "results")
	if st["backend"] != backend {
		t.Fatalf("backend %v, want %s", st["backend"], backend)
	}
	bl := st["baseline"].(map[string]any)
	want(bl, "baseline", "name", "about", "runs", "events_per_sec", "p50_ns", "p99_ns")
	if len(bl["runs"].([]any)) != 2 {
		t.Fatalf("baseline runs: %v", bl["runs"])
	}
	results := st["results"].([]any)
	if len(results) != len(workload.Suite()) {
		t.Fatalf("%d results, want %d", len(results), len(workload.Suite()))
	}
	for i, r := range results {
		res := r.(map[string]any)
		want(res, "result", "workload", "ops", "events", "elapsed_ns", "ops_per_sec", "events_per_sec",
			"latency", "allocs_per_op", "bytes_per_op", "stopped", "timeline", "vs_baseline")
		want(res["latency"].(map[string]any), "latency", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns")
		want(res["vs_baseline"].(map[string]any), "vs_baseline", "throughput", "p50", "p99")
		if res["workload"] != workload.Suite()[i].Name || res["stopped"] != workload.StopBudget || res["error"] != nil {
			t.Fatalf("result %d: %v", i, res)
		}
	}
}

func TestBenchCommandTable(t *testing.T) {
	out, _, err := runBench(t, "--workload", "append-batch10", "--workload", "last-position", "--events", "200")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"baselines:", "append-batch10: append a batch", "last-position:", "EVENTS/S", "OPS/S", "vs BASE"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "load-10") {
		t.Fatalf("table has a workload that was not asked for:\n%s", out)
	}
}

func TestBenchCommandErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--store", "bogus://127.0.0.1/x"}, `unknown scheme "bogus"`},
		{[]string{"--workload", "nope"}, `workload "nope"`},
		{[]string{"extra"}, "unknown command"},
	}
	for _, tc := range tests {
		out, _, err := runBench(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out != "" {
			t.Errorf("varve bench %v: error %v, output %q; want an error with %q and no output", tc.args, err, out, tc.want)
		}
	}
}
