package jsclient

import "testing"

func TestVersionAtLeast(t *testing.T) {
	cases := []struct {
		v                   string
		major, minor, patch int
		want                bool
	}{
		{"2.9.10", 2, 9, 21, false},
		{"2.9.21", 2, 9, 21, true},
		{"2.9.25", 2, 9, 21, true},
		{"2.10.0", 2, 9, 21, true},
		{"2.15.2", 2, 12, 0, true},
		{"2.11.0-RC.1", 2, 11, 0, true},
		{"2.10.29", 2, 11, 0, false},
		{"3.0.0", 2, 12, 0, true},
		{"1.4.1", 2, 9, 21, false},
		{"2.12", 2, 12, 0, true},
		{"", 2, 9, 21, false},
		{"nonsense", 2, 9, 21, false},
	}
	for _, c := range cases {
		if got := versionAtLeast(c.v, c.major, c.minor, c.patch); got != c.want {
			t.Errorf("versionAtLeast(%q, %d.%d.%d) = %v, want %v", c.v, c.major, c.minor, c.patch, got, c.want)
		}
	}
}
