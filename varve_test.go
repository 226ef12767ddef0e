package varve_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

func TestPositionText(t *testing.T) {
	cases := []struct {
		pos  varve.Position
		text string
	}{
		{varve.Start, "0"},
		{varve.Position{Seq: 42}, "42"},
		{varve.Position{Commit: 7, Seq: 9}, "7:9"},
		{varve.Position{Commit: 1<<64 - 1, Seq: 1<<64 - 1}, "18446744073709551615:18446744073709551615"},
	}
	for _, tc := range cases {
		if got := tc.pos.String(); got != tc.text {
			t.Errorf("%+v.String() = %q, want %q", tc.pos, got, tc.text)
		}
		p, err := varve.ParsePosition(tc.text)
		if err != nil || p != tc.pos {
			t.Errorf("ParsePosition(%q) = %+v, %v", tc.text, p, err)
		}
	}
	for _, bad := range []string{"", "x", "1:", ":1", "-1", "1:2:3", "18446744073709551616"} {
		if _, err := varve.ParsePosition(bad); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("ParsePosition(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestPositionOrder(t *testing.T) {
	ordered := []varve.Position{varve.Start, {Seq: 1}, {Seq: 2}, {Commit: 1}, {Commit: 1, Seq: 5}, {Commit: 2, Seq: 0}}
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := ordered[i].Compare(ordered[j]); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func TestExpectedVersionMatches(t *testing.T) {
	cases := []struct {
		exp     varve.ExpectedVersion
		current varve.Version
		want    bool
	}{
		{varve.Any, 0, true}, {varve.Any, 9, true},
		{varve.NoStream, 0, true}, {varve.NoStream, 1, false},
		{varve.StreamExists, 0, false}, {varve.StreamExists, 3, true},
		{varve.Exact(3), 3, true}, {varve.Exact(3), 4, false}, {varve.Exact(0), 0, true},
		{varve.ExpectedVersion(-5), 0, false},
	}
	for _, tc := range cases {
		if got := tc.exp.Matches(tc.current); got != tc.want {
			t.Errorf("%s.Matches(%d) = %v, want %v", tc.exp, tc.current, got, tc.want)
		}
	}
}

func TestNewEventID(t *testing.T) {
	seen := map[[16]byte]bool{}
	for range 10000 {
		id := varve.NewEventID()
		if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
			t.Fatalf("id %s is not a UUIDv7", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
}

func TestNewConfig(t *testing.T) {
	if _, err := varve.New(nil, varve.Config{}); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
}
