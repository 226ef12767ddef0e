package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varve-go/varve/lab"
)

func TestDeliverBenchCommand(t *testing.T) {
	html := filepath.Join(t.TempDir(), "deliver.html")
	out, err := runCLI(t, "deliver-bench", "-t", "20", "-e", "2", "--streams", "4", "-l", "0.5", "-c", "1,3", "--json", "--html", html)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rs []lab.DeliverResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 2 || rs[1].Concurrency != 3 || rs[1].Events != 40 {
		t.Fatalf("%v: %s", err, out)
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), "Efficiency") || !strings.Contains(string(page), "<polyline") {
		t.Fatalf("html has no efficiency chart: %v", err)
	}
	if strings.Contains(string(page), "<script") || strings.Contains(string(page), "https://") {
		t.Fatalf("html is not self-contained")
	}
	if _, err := runCLI(t, "deliver-bench", "--ordering", "sideways"); err == nil {
		t.Fatal("a bad ordering must fail")
	}
}
