package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// run runs the CLI with args and returns what it printed.
func run(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := rootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("varve %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String()
}

func TestMatrixCommand(t *testing.T) {
	out, _ := run(t, "matrix", "--streams", "200", "--procs", "1,2", "--mix", "90/10,0/100", "--duration", "20ms", "--json")
	var rep struct {
		Store string `json:"store"`
		Cells []struct {
			Mix       string  `json:"mix"`
			Procs     int     `json:"procs"`
			ReadRate  float64 `json:"read_rate"`
			WriteRate float64 `json:"write_rate"`
			Errors    int64   `json:"errors"`
		} `json:"cells"`
		Machine struct {
			Cores int `json:"cores"`
		} `json:"machine"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("matrix --json is not JSON: %v\n%s", err, out)
	}
	if len(rep.Cells) != 4 || rep.Cells[0].Mix != "90%-10%" || rep.Cells[3].Procs != 2 || rep.Machine.Cores == 0 {
		t.Fatalf("unexpected matrix report: %+v", rep)
	}
	for _, c := range rep.Cells {
		if c.WriteRate <= 0 || c.Errors != 0 {
			t.Fatalf("cell %+v did no writes or had errors", c)
		}
	}
	table, _ := run(t, "matrix", "--streams", "100", "--procs", "1", "--mix", "50/50", "--duration", "10ms")
	for _, col := range []string{"WORK", "PROCS", "READ RATE", "WRITE RATE", "50%-50%"} {
		if !strings.Contains(table, col) {
			t.Fatalf("table lacks %q:\n%s", col, table)
		}
	}
}

func TestSoakCommand(t *testing.T) {
	out, _ := run(t, "soak", "--duration", "1500ms", "--interval", "100ms", "--prune-above", "500", "--aggregates", "50", "--json")
	var rep struct {
		Ops     int64 `json:"ops"`
		Errors  int64 `json:"errors"`
		Samples []struct {
			HeapAlloc uint64 `json:"heap_alloc"`
			RSS       uint64 `json:"rss"`
		} `json:"samples"`
		Verdict struct {
			Trends []struct {
				Name string `json:"name"`
			} `json:"trends"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("soak --json is not JSON: %v\n%s", err, out)
	}
	if rep.Ops == 0 || rep.Errors != 0 || len(rep.Samples) < 10 || len(rep.Verdict.Trends) != 2 {
		t.Fatalf("unexpected soak report: ops %d errors %d samples %d trends %d", rep.Ops, rep.Errors, len(rep.Samples), len(rep.Verdict.Trends))
	}
	if rep.Samples[0].HeapAlloc == 0 || rep.Samples[0].RSS == 0 {
		t.Fatalf("memory sample is empty: %+v", rep.Samples[0])
	}
	text, _ := run(t, "soak", "--duration", "600ms", "--interval", "100ms", "--aggregates", "20")
	for _, want := range []string{"ops/s", "Final Alloc", "Total Alloc", "Heap Objects", "GC Cycles", "RSS", "verdict:"} {
		if !strings.Contains(text, want) {
			t.Fatalf("soak output lacks %q:\n%s", want, text)
		}
	}
}

func TestParseBytes(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{{"512MiB", 512 << 20, true}, {"1GiB", 1 << 30, true}, {"64 KiB", 64 << 10, true}, {"1000", 1000, true}, {"0", 0, true}, {"-1", 0, false}, {"lots", 0, false}}
	for _, tc := range cases {
		got, err := parseBytes(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v", tc.in, got, err)
		}
	}
}

func TestHTMLReports(t *testing.T) {
	dir := t.TempDir()
	matrix, soak := dir+"/matrix.html", dir+"/soak.html"
	run(t, "matrix", "--streams", "100", "--procs", "1,2", "--mix", "50/50", "--duration", "10ms", "--html", matrix)
	run(t, "soak", "--duration", "500ms", "--interval", "100ms", "--aggregates", "20", "--html", soak)
	for _, name := range []string{matrix, soak} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		page := string(b)
		if !strings.Contains(page, "<svg") || !strings.Contains(page, "<polyline") {
			t.Fatalf("%s has no chart", name)
		}
		if strings.Contains(page, "<script") || strings.Contains(page, "https://") {
			t.Fatalf("%s is not self-contained", name)
		}
	}
}
