package varve_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

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

// NewEventID makes UUIDv7s that ascend in each goroutine and are unique
// across goroutines, with the time of their making in the first 48 bits
// (ahead of the clock only after 2,048 ids in one millisecond).
func TestNewEventID(t *testing.T) {
	const workers, each = 4, 20000
	ids := make([][]uuid.UUID, workers)
	before := time.Now().UnixMilli()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				ids[w] = append(ids[w], varve.NewEventID())
			}
		})
	}
	wg.Wait()
	after := time.Now().UnixMilli()
	seen := map[uuid.UUID]bool{}
	for w := range ids {
		for i, id := range ids[w] {
			if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
				t.Fatalf("id %s is not a UUIDv7", id)
			}
			if seen[id] {
				t.Fatalf("duplicate id %s", id)
			}
			seen[id] = true
			if i > 0 && bytes.Compare(ids[w][i-1][:], id[:]) >= 0 {
				t.Fatalf("goroutine %d: id %s after %s", w, id, ids[w][i-1])
			}
			ms := int64(binary.BigEndian.Uint64(id[:8]) >> 16)
			if ms < before || ms > after+workers*each/2048 {
				t.Fatalf("id %s holds %d ms, made between %d and %d", id, ms, before, after)
			}
		}
	}
}

func TestNewConfig(t *testing.T) {
	if _, err := varve.New(nil, varve.Config{}); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
}

func BenchmarkNewEventID(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			varve.NewEventID()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				varve.NewEventID()
			}
		})
	})
}
