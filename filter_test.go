package varve_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// recording is a memory backend that records the filtered queries the
// Store hands it, or refuses them with ErrNotSupported.
type recording struct {
	*memory.Backend
	refuse  bool
	queries []varve.FilterQuery
}

func (r *recording) ReadAllFiltered(ctx context.Context, q varve.FilterQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, varve.Position, error) {
	r.queries = append(r.queries, q)
	if r.refuse {
		return buf, varve.Position{}, varve.ErrNotSupported
	}
	return r.Backend.ReadAllFiltered(ctx, q, buf)
}

func TestCategory(t *testing.T) {
	cases := []struct{ sep, stream, want string }{
		{"", "order-42", "order"},
		{"", "order-42-x", "order"},
		{"", "order", "order"},
		{"", "-x", ""},
		{"::", "order::42", "order"},
		{"::", "order-42", "order-42"},
		{"_", "a_b_c", "a"},
	}
	for _, tc := range cases {
		s := newStore(t, memory.New(), varve.Config{CategorySeparator: tc.sep})
		if got := s.Category(tc.stream); got != tc.want {
			t.Errorf("separator %q: category of %q is %q, want %q", tc.sep, tc.stream, got, tc.want)
		}
	}
	for _, sep := range []string{"a\x00", "\xff", "123456789"} {
		if _, err := varve.New(memory.New(), varve.Config{CategorySeparator: sep}); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("separator %q: %v, want ErrInvalidArgument", sep, err)
		}
	}
}

func TestFilterBadInput(t *testing.T) {
	s := newStore(t, memory.New(), varve.Config{})
	many := make([]string, varve.MaxFilterValues+1)
	for i := range many {
		many[i] = fmt.Sprint("c", i)
	}
	for _, f := range []varve.Filter{
		{Categories: []string{""}},
		{Types: []string{"a\x00b"}},
		{StreamPrefixes: []string{"\xff"}},
		{StreamPrefixes: []string{strings.Repeat("p", varve.MaxStreamIDLen+1)}},
		{Categories: many},
	} {
		if _, err := s.ReadAllPage(context.Background(), varve.Start, nil, f); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("%v: ReadAllPage gives %v, want ErrInvalidArgument", f, err)
		}
		if _, err := collectAll(s.ReadAll(context.Background(), varve.Start, f)); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("%v: ReadAll gives %v, want ErrInvalidArgument", f, err)
		}
	}
}

// TestFilterPushdown checks the filter the backend gets: sorted lists
// without repeats, and the category that a stream prefix with the
// separator implies.
func TestFilterPushdown(t *testing.T) {
	cases := []struct {
		name string
		in   varve.Filter
		want *varve.Filter // nil: the backend is not asked, nothing matches
	}{
		{"sorted", varve.Filter{Categories: []string{"b", "a", "b"}, Types: []string{"T", "S", "T"}},
			&varve.Filter{Categories: []string{"a", "b"}, Types: []string{"S", "T"}}},
		{"prefixes imply categories", varve.Filter{StreamPrefixes: []string{"order-1", "cart-", "order-2"}},
			&varve.Filter{Categories: []string{"cart", "order"}, StreamPrefixes: []string{"cart-", "order-1", "order-2"}}},
		{"a prefix without separator implies nothing", varve.Filter{StreamPrefixes: []string{"order-1", "ca"}},
			&varve.Filter{StreamPrefixes: []string{"ca", "order-1"}}},
		{"prefixes narrow categories", varve.Filter{Categories: []string{"order", "cart"}, StreamPrefixes: []string{"order-1", "user-"}},
			&varve.Filter{Categories: []string{"order"}, StreamPrefixes: []string{"order-1"}}},
		{"disjoint", varve.Filter{Categories: []string{"cart"}, StreamPrefixes: []string{"order-1"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &recording{Backend: memory.New()}
			s := newStore(t, b, varve.Config{})
			ctx := context.Background()
			for _, st := range []string{"order-1", "cart-1", "user-1"} {
				if _, err := s.Append(ctx, st, varve.Any, varve.NewEvent("T", nil)); err != nil {
					t.Fatal(err)
				}
			}
			page, err := s.ReadAllPage(ctx, varve.Start, nil, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if len(b.queries) != 0 || len(page.Events) != 0 || page.Through != (varve.Position{Seq: 3}) {
					t.Fatalf("backend asked %v, page %v through %s; want no question, no event, through 3", b.queries, page.Events, page.Through)
				}
				return
			}
			if len(b.queries) != 1 {
				t.Fatalf("backend asked %d times", len(b.queries))
			}
			got := b.queries[0].Filter
			if !slices.Equal(got.Categories, tc.want.Categories) || !slices.Equal(got.Types, tc.want.Types) || !slices.Equal(got.StreamPrefixes, tc.want.StreamPrefixes) {
				t.Fatalf("backend got %+v, want %+v", got, *tc.want)
			}
		})
	}
}

// TestFilterFallback: a store over a backend without the capability, or
// one that refuses the filter, filters pages itself with the same result.
func TestFilterFallback(t *testing.T) {
	ctx := context.Background()
	backends := map[string]varve.Backend{
		"memory":   memory.New(),
		"bare":     bare{memory.New()},
		"refusing": &recording{Backend: memory.New(), refuse: true},
	}
	results := map[string][]string{}
	for name, b := range backends {
		s := newStore(t, b, varve.Config{CategorySeparator: "::", PageSize: 3})
		if got := s.Capabilities().Filter; got == (name == "bare") {
			t.Fatalf("%s: Capabilities().Filter is %v", name, got)
		}
		for i := range 20 {
			st := fmt.Sprintf("%s::%d", []string{"order", "cart"}[i%2], i%5)
			if _, err := s.Append(ctx, st, varve.Any, varve.NewEvent([]string{"A", "B", "C"}[i%3], nil)); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := collectAll(s.ReadAll(ctx, varve.Start, varve.Filter{Categories: []string{"order"}, Types: []string{"A", "C"}}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, e := range evs {
			results[name] = append(results[name], fmt.Sprintf("%s@%d %s", e.Stream, e.Version, e.Type))
		}
	}
	if len(results["memory"]) == 0 {
		t.Fatal("nothing matched")
	}
	if !slices.Equal(results["memory"], results["bare"]) || !slices.Equal(results["memory"], results["refusing"]) {
		t.Fatalf("results differ:\n%v\n%v\n%v", results["memory"], results["bare"], results["refusing"])
	}
}

func collectAll(seq func(func(varve.RecordedEvent, error) bool)) ([]varve.RecordedEvent, error) {
	var out []varve.RecordedEvent
	for e, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}
