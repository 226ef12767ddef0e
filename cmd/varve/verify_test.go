package main

import (
	"path/filepath"
	"testing"
)

// TestVerify: varve verify on a SQLite file, with a segmented delivery and
// a projection, finds no anomaly and says what it did, in plain JSON; bad
// flags are usage errors.
func TestVerify(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "verify.db")
	if r := runIn(t, "init", "--store", url); r.code != exitOK {
		t.Fatalf("init: exit %d\n%s", r.code, r.stderr)
	}
	out := filepath.Join(t.TempDir(), "verify.json")
	r := runIn(t, "verify", "--store", url, "--duration", "300ms", "--writers", "2", "--seed", "5", "--json="+out,
		"--delivery-segments", "2", "--lease-ttl", "1s", "--projection")
	doc, _ := r.doc.(map[string]any)
	if r.code != exitOK || doc["seed"] != 5.0 || doc["anomaly_count"] != 0.0 || doc["acknowledged"] == 0.0 || doc["events"] == 0.0 ||
		doc["delivered"].(float64) < doc["events"].(float64) || doc["projected"] != doc["events"] {
		t.Fatalf("verify: exit %d, %v\n%s", r.code, r.doc, r.stderr)
	}
	for _, bad := range [][]string{{"--writers", "0"}, {"--delivery-segments", "-1"}, {"--delivery-segments", "65"}, {"--lease-ttl", "1ms"}} {
		if r := runIn(t, append([]string{"verify", "--store", url}, bad...)...); r.code != exitUsage {
			t.Fatalf("verify %v: exit %d, want usage", bad, r.code)
		}
	}
}
