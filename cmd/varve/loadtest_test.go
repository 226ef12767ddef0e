package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/varve-go/varve/lab"
)

func TestLoadtestEnvAndFlags(t *testing.T) {
	t.Setenv("N", "300")
	t.Setenv("U", "10")
	t.Setenv("B", "100")
	t.Setenv("BACKEND", "mem")
	t.Setenv("SNAPSHOT", "false")
	t.Setenv("CACHE", "true")
	t.Setenv("LOAD_AFTER_SAVE", "1")
	t.Setenv("WORKERS", "4") // the flag below wins
	var out, progress bytes.Buffer
	root := rootCmd()
	root.SetOut(&out)
	root.SetErr(&progress)
	root.SetArgs([]string{"loadtest", "--workers", "2", "--json"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	var res lab.LoadtestResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	c := res.Config
	if c.Ops != 300 || c.Users != 10 || c.Batch != 100 || c.Snapshots || !c.Cache || !c.LoadAfterSave || c.Workers != 2 || res.Backend != "memory" {
		t.Fatalf("config %+v backend %q: env or flags not applied", c, res.Backend)
	}
	if res.Verified != 300 || res.Mismatches != 0 {
		t.Fatalf("verified %d, mismatches %d", res.Verified, res.Mismatches)
	}
	if !strings.Contains(progress.String(), "=== Load Test Configuration ===") || strings.Count(progress.String(), "ops/s") != 3 {
		t.Fatalf("progress on stderr:\n%s", progress.String())
	}
}

func TestLoadtestBadEnv(t *testing.T) {
	t.Setenv("N", "many")
	root := rootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"loadtest"})
	if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), `N="many"`) {
		t.Fatalf("bad N: %v", err)
	}
}
