package migrate

import (
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	ok := fstest.MapFS{
		"m/0002_more.sql": {Data: []byte("B")},
		"m/0001_init.sql": {Data: []byte("A")},
		"m/10_late.sql":   {Data: []byte("C")},
		"m/README.md":     {Data: []byte("not a migration")},
	}
	ms, err := Load(ok, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[0].SQL != "A" || ms[1].Version != 2 || ms[2].Name != "10_late.sql" {
		t.Fatalf("loaded %+v", ms)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"no number": {"m/init.sql": {Data: nil}},
		"zero":      {"m/0_x.sql": {Data: nil}},
		"same":      {"m/1_a.sql": {Data: nil}, "m/01_b.sql": {Data: nil}},
	} {
		if _, err := Load(fsys, "m"); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
