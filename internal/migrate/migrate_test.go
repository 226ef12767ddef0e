package migrate

import (
	"errors"
	"slices"
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

func TestPending(t *testing.T) {
	ms := []Migration{{Version: 13, Name: "0013_baseline.sql"}, {Version: 14, Name: "0014_a.sql"}, {Version: 15, Name: "0015_b.sql"}}
	cases := []struct {
		current int64
		want    []int64 // versions
		tooOld  bool
	}{
		{0, []int64{13, 14, 15}, false},
		{1, nil, true},
		{12, nil, true},
		{13, []int64{14, 15}, false},
		{14, []int64{15}, false},
		{15, nil, false},
		{16, nil, false},
	}
	for _, tc := range cases {
		got, err := Pending(ms, tc.current)
		if tc.tooOld != errors.Is(err, ErrBeforeBaseline) || !tc.tooOld && err != nil {
			t.Errorf("version %d: %v", tc.current, err)
			continue
		}
		var vs []int64
		for _, m := range got {
			vs = append(vs, m.Version)
		}
		if !slices.Equal(vs, tc.want) {
			t.Errorf("version %d: pending %v, want %v", tc.current, vs, tc.want)
		}
	}
	if _, err := Pending(nil, 0); err == nil {
		t.Error("no migrations: no error")
	}
}

func TestLoadCode(t *testing.T) {
	fsys := fstest.MapFS{
		"c/tagged.sql": {Data: []byte("B")},
		"c/append.sql": {Data: []byte("A")},
		"c/notes.md":   {Data: []byte("not code")},
	}
	cs, err := LoadCode(fsys, "c")
	if err != nil || len(cs) != 2 || cs[0].Name != "append.sql" || cs[0].SQL != "A" || cs[1].Name != "tagged.sql" {
		t.Fatalf("loaded %+v, %v", cs, err)
	}
}
