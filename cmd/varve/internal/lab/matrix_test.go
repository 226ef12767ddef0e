package lab

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

func TestRunMatrix(t *testing.T) {
	rep, err := RunMatrix(context.Background(), MatrixConfig{
		Store: "memory:", Streams: 500, Mixes: []Mix{{100, 0}, {50, 50}, {0, 100}},
		Workers: []int{1, 4}, Duration: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 6 {
		t.Fatalf("%d cells, want 6", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if c.Errors != 0 {
			t.Errorf("%s x %d: %d errors", c.Mix, c.Workers, c.Errors)
		}
		if c.ReadLatency.Samples != c.Reads || c.WriteLatency.Samples != c.Writes || c.Share <= 0 || c.Share > 1 {
			t.Errorf("%s x %d: latency samples %d/%d for %d reads and %d writes, share %v", c.Mix, c.Workers,
				c.ReadLatency.Samples, c.WriteLatency.Samples, c.Reads, c.Writes, c.Share)
		}
		switch c.ReadPct {
		case 100:
			if c.Reads == 0 || c.Writes != 0 {
				t.Errorf("read-only cell did %d reads, %d writes", c.Reads, c.Writes)
			}
		case 0:
			if c.Writes == 0 || c.Reads != 0 {
				t.Errorf("write-only cell did %d reads, %d writes", c.Reads, c.Writes)
			}
		default:
			if c.Reads == 0 || c.Writes == 0 {
				t.Errorf("mixed cell did %d reads, %d writes", c.Reads, c.Writes)
			}
		}
	}
	if h := Holdup(rep.Cells); len(h) != 3 || h[0].Workers != 4 || h[0].Ratio <= 0 || h[0].Ratio > 1 {
		t.Fatalf("holdup %+v", h)
	}
	rows := rep.Rows()
	if len(rows) != 8 { // 100/0 and 0/100 have one op each, 50/50 two, at two worker counts
		t.Fatalf("%d rows, want 8: %+v", len(rows), rows)
	}
	if rows[0].Name != "100/0 reads, 1 worker" || rows[0].Unit != "reads" || rows[0].Latency.Samples == 0 || rows[0].Ratio == nil {
		t.Fatalf("first row %+v", rows[0])
	}
}

func TestParseMixes(t *testing.T) {
	cases := []struct {
		in   string
		want []Mix
		ok   bool
	}{
		{"100/0,90/10", []Mix{{100, 0}, {90, 10}}, true},
		{" 50/50 ", []Mix{{50, 50}}, true},
		{"60/50", nil, false},
		{"x/y", nil, false},
		{"100", nil, false},
	}
	for _, tc := range cases {
		got, err := ParseMixes(tc.in)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, varve.ErrInvalidArgument)) {
			t.Errorf("ParseMixes(%q): %v", tc.in, err)
			continue
		}
		if tc.ok && (len(got) != len(tc.want) || got[0] != tc.want[0]) {
			t.Errorf("ParseMixes(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
