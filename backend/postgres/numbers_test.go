package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// TestPositionNumberBounds: a number is tx<<16 | (65535 - the events of
// tx after the position), and a position outside those bits has none.
func TestPositionNumberBounds(t *testing.T) {
	const maxTx = 1<<37 - 1
	for _, tc := range []struct {
		tx    uint64
		after int64
		want  uint64
		err   string
	}{
		{tx: 1000, after: 0, want: 1000<<16 | 65535},
		{tx: 1000, after: 3, want: 1000<<16 | 65532},
		{tx: 1000, after: 65535, want: 1000 << 16},
		{tx: maxTx, after: 0, want: varve.MaxPositionNumber},
		{tx: 1000, after: 65536, err: "65536 events of its transaction come after it"},
		{tx: maxTx + 1, after: 0, err: "transaction ids over 137438953471"},
		{tx: 1 << 63, after: 0, err: "transaction ids over"},
	} {
		p := varve.Position{Commit: tc.tx, Seq: 7}
		got, err := postgres.PositionNumber(p, tc.after)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s with %d after: %d, %v; want %d", p, tc.after, got, err, tc.want)
		case tc.err != "" && (!errors.Is(err, varve.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s with %d after: %d, %v; want an invalid argument saying %q", p, tc.after, got, err, tc.err)
		}
	}
}

// TestPositionNumbersLargeTransaction: of a transaction of 65,537 events,
// the first has no number (ErrInvalidArgument, and so no wrong number);
// the others are numbered from tx<<16 to tx<<16|65535, and their numbers
// give back their positions.
func TestPositionNumbersLargeTransaction(t *testing.T) {
	const n = 1<<16 + 1
	b := open(t, config(t, testSchema+"_numbers"))
	s, err := varve.New(b, varve.Config{MaxAppendEvents: n})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	evs := make([]varve.Event, n)
	for i := range evs {
		evs[i] = varve.Event{ID: varve.NewEventID(), Type: "E"}
	}
	stream := fmt.Sprintf("large-%d", time.Now().UnixNano())
	if _, err := s.Append(ctx, stream, varve.NoStream, evs...); err != nil {
		t.Fatal(err)
	}
	var ps []varve.Position
	for _, v := range []varve.Version{1, 2, 3, n} {
		for e, err := range s.ReadStream(ctx, stream, varve.From(v), varve.Limit(1)) {
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, e.Position)
		}
	}
	tx := ps[0].Commit
	if _, err := s.NumberPositions(ctx, ps[:1]); !errors.Is(err, varve.ErrInvalidArgument) || !strings.Contains(err.Error(), "65536 events") {
		t.Fatalf("the number of the first of %d events of a transaction: %v, want an invalid argument", n, err)
	}
	ns, err := s.NumberPositions(ctx, ps[1:])
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{tx << 16, tx<<16 | 1, tx<<16 | 65535}; fmt.Sprint(ns) != fmt.Sprint(want) {
		t.Fatalf("the numbers of the 2nd, 3rd and last events: %v, want %v", ns, want)
	}
	for i, num := range ns {
		p, err := s.PositionOfNumber(ctx, num)
		if err != nil || p != ps[i+1] {
			t.Fatalf("the position of %d: %s, %v; want %s", num, p, err, ps[i+1])
		}
	}
}

// BenchmarkNumberPositions: numbering a page of 256 events of $all (what the
// server's DCB interface adds to each page it reads), against reading that
// page (ReadAllPage), alternately, for transactions of 1, 5 and 100 events.
// base-ns/op is the read, varve-ns/op the numbering.
func BenchmarkNumberPositions(b *testing.B) {
	env := newBenchEnv(b, 4)
	ctx := context.Background()
	for _, perTx := range []int{1, 5, 100} {
		b.Run(fmt.Sprintf("events-per-tx=%d", perTx), func(b *testing.B) {
			start, err := env.s.LastPosition(ctx)
			if err != nil {
				b.Fatal(err)
			}
			stream := fmt.Sprintf("numbers-%d", benchRun.Add(1))
			evs := benchEvents(perTx)
			for range 2560 / perTx {
				freshIDs(evs)
				if _, err := env.s.Append(ctx, stream, varve.Any, evs...); err != nil {
					b.Fatal(err)
				}
			}
			var pages [][]varve.Position
			var afters []varve.Position
			at := start
			for len(pages) < 10 {
				page, err := env.s.ReadAllPage(ctx, at, nil, varve.PageSize(256))
				if err != nil {
					b.Fatal(err)
				}
				ps := make([]varve.Position, len(page.Events))
				for i, e := range page.Events {
					ps[i] = e.Position
				}
				pages, afters, at = append(pages, ps), append(afters, at), page.Through
			}
			var p pair
			buf := make([]varve.RecordedEvent, 0, 256)
			i := 0
			for b.Loop() {
				k := i % len(pages)
				i++
				p.timeBase(func() {
					if _, err := env.s.ReadAllPage(ctx, afters[k], buf[:0], varve.PageSize(256)); err != nil {
						b.Fatal(err)
					}
				})
				p.timeVarve(func() {
					if _, err := env.s.NumberPositions(ctx, pages[k]); err != nil {
						b.Fatal(err)
					}
				})
			}
			p.report(b, 256, 1)
		})
	}
}
