package filescan_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/varve-go/varve/internal/filescan"
)

func TestCount(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.db", "xxSECRETxxSECRET")
	write("jetstream/S/msgs/1.blk", "..SECRET..")
	write("b.db-wal", "nothing here")
	for _, c := range []struct {
		pattern string
		want    map[string]int
	}{
		{"SECRET", map[string]int{"a.db": 2, "jetstream/S/msgs/1.blk": 1}},
		{"absent", map[string]int{}},
		{"nothing", map[string]int{"b.db-wal": 1}},
	} {
		got, err := filescan.Count(dir, []byte(c.pattern))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Count(%q) = %v, want %v", c.pattern, got, c.want)
		}
	}
	if _, err := filescan.Count(dir, nil); err == nil {
		t.Error("an empty pattern was accepted")
	}
	if _, err := filescan.Count(filepath.Join(dir, "missing"), []byte("x")); err != nil {
		t.Errorf("a missing directory: %v", err)
	}
}
