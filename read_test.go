package varve_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// budgets is a memory backend that records the byte budget of every page
// the Store asks it for.
type budgets struct {
	*memory.Backend
	seen []int
}

func (b *budgets) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	b.seen = append(b.seen, q.MaxBytes)
	return b.Backend.ReadStream(ctx, q, buf)
}

func (b *budgets) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	b.seen = append(b.seen, q.MaxBytes)
	return b.Backend.ReadAll(ctx, q, buf)
}

func (b *budgets) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	b.seen = append(b.seen, q.MaxBytes)
	return b.Backend.ReadAllFiltered(ctx, q, buf)
}

func (b *budgets) ReadQuery(ctx context.Context, q varve.QueryRequest, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	b.seen = append(b.seen, q.MaxBytes)
	return b.Backend.ReadQuery(ctx, q, buf)
}

// TestPageBytesReachBackend: every read hands the backend the budget of
// PageBytes, else the Config's, else DefaultMaxPageBytes, also the raw
// pages of a filter the Store applies itself.
func TestPageBytesReachBackend(t *testing.T) {
	ctx := context.Background()
	f := varve.Filter{Types: []string{"E"}}
	q := varve.Query{Items: []varve.QueryItem{{Tags: []string{"t"}}}}
	reads := map[string]func(s *varve.Store, opts ...varve.ReadOption) error{
		"stream": func(s *varve.Store, opts ...varve.ReadOption) error {
			_, err := collectAll(s.ReadStream(ctx, "s", streamOpts(opts)...))
			return err
		},
		"stream backward": func(s *varve.Store, opts ...varve.ReadOption) error {
			_, err := collectAll(s.ReadStream(ctx, "s", append(streamOpts(opts), varve.ReadBackward())...))
			return err
		},
		"$all": func(s *varve.Store, opts ...varve.ReadOption) error {
			_, err := collectAll(s.ReadAll(ctx, varve.Start, allOpts(opts)...))
			return err
		},
		"$all page": func(s *varve.Store, opts ...varve.ReadOption) error {
			_, err := s.ReadAllPage(ctx, varve.Start, nil, allOpts(opts)...)
			return err
		},
		"filtered": func(s *varve.Store, opts ...varve.ReadOption) error {
			_, err := collectAll(s.ReadAll(ctx, varve.Start, append(allOpts(opts), f)...))
			return err
		},
		"filtered page": func(s *varve.Store, opts ...varve.ReadOption) error {
			_, err := s.ReadAllPage(ctx, varve.Start, nil, append(allOpts(opts), f)...)
			return err
		},
		"query": func(s *varve.Store, opts ...varve.ReadOption) error {
			_, err := collectAll(s.ReadQuery(ctx, q, varve.Start, allOpts(opts)...))
			return err
		},
		"query page": func(s *varve.Store, opts ...varve.ReadOption) error {
			_, err := s.ReadQueryPage(ctx, q, varve.Start, nil, allOpts(opts)...)
			return err
		},
	}
	cases := []struct {
		name string
		cfg  int
		opts []varve.ReadOption
		want int
	}{
		{"default", 0, nil, varve.DefaultMaxPageBytes},
		{"config", 5000, nil, 5000},
		{"option", 5000, []varve.ReadOption{varve.PageBytes(77)}, 77},
		{"option 0 is the config's", 5000, []varve.ReadOption{varve.PageBytes(0)}, 5000},
	}
	for _, tc := range cases {
		for name, read := range reads {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				b := &budgets{Backend: memory.New()}
				s := newStore(t, b, varve.Config{MaxPageBytes: tc.cfg})
				e := varve.NewEvent("E", make([]byte, 100))
				e.Tags = []string{"t"}
				if _, err := s.Append(ctx, "s", varve.Any, e); err != nil {
					t.Fatal(err)
				}
				if err := read(s, tc.opts...); err != nil {
					t.Fatal(err)
				}
				if len(b.seen) == 0 || slices.ContainsFunc(b.seen, func(n int) bool { return n != tc.want }) {
					t.Fatalf("budgets handed to the backend: %v, want %d", b.seen, tc.want)
				}
			})
		}
	}
}

func streamOpts(opts []varve.ReadOption) []varve.StreamOption {
	out := make([]varve.StreamOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

func allOpts(opts []varve.ReadOption) []varve.AllOption {
	out := make([]varve.AllOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// TestPageFull: a page is Full when it stopped at its count or at its
// byte budget, and only then; the Store filtering pages itself agrees.
func TestPageFull(t *testing.T) {
	ctx := context.Background()
	for _, filtered := range []string{"none", "backend", "store"} {
		var b varve.Backend = memory.New()
		if filtered == "store" {
			b = bare{b}
		}
		s := newStore(t, b, varve.Config{})
		for i := range 5 {
			if _, err := s.Append(ctx, fmt.Sprint("c-", i%2), varve.Any, varve.NewEvent("E", make([]byte, 100))); err != nil {
				t.Fatal(err)
			}
		}
		var opts []varve.AllOption
		if filtered != "none" {
			opts = append(opts, varve.Filter{Categories: []string{"c"}})
		}
		cases := []struct {
			name  string
			after varve.Position
			opts  []varve.AllOption
			n     int
			full  bool
		}{
			{"budget below an event", varve.Start, []varve.AllOption{varve.PageBytes(1)}, 1, true},
			{"budget between events", varve.Start, []varve.AllOption{varve.PageBytes(150)}, 2, true},
			{"budget of two events", varve.Start, []varve.AllOption{varve.PageBytes(200)}, 2, true},
			{"count", varve.Start, []varve.AllOption{varve.Limit(3)}, 3, true},
			{"everything", varve.Start, nil, 5, false},
			{"budget above the rest", varve.Start, []varve.AllOption{varve.PageBytes(1000)}, 5, false},
		}
		for _, tc := range cases {
			page, err := s.ReadAllPage(ctx, tc.after, nil, append(slices.Clone(opts), tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Events) != tc.n || page.Full != tc.full {
				t.Errorf("filter %s, %s: %d events, full %v; want %d, %v", filtered, tc.name, len(page.Events), page.Full, tc.n, tc.full)
			}
		}
	}
	if _, err := varve.New(memory.New(), varve.Config{MaxPageBytes: -1}); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Errorf("negative MaxPageBytes: %v, want ErrInvalidArgument", err)
	}
}
