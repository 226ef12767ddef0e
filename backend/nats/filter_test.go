package nats

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/varve-go/varve"
)

// TestSubjectLayout checks the category layout's tokens: every stream id
// maps to two subject tokens, the first of which is its category's, and
// back; distinct ids give distinct subjects.
func TestSubjectLayout(t *testing.T) {
	ids := []string{"order-42", "order", "order-", "-", "-42", "--", "a-b-c", "a.b-c.d", "=", "=-=", "x y/z-ü", "\xff-\x00", "order::1", "::", "a::b::c", "::x"}
	for _, sep := range []string{"-", "::"} {
		t.Run(sep, func(t *testing.T) {
			b := &Backend{evPrefix: "p.e.", layout: layoutCategory, sep: sep}
			seen := map[string]string{}
			for _, id := range ids {
				subj := b.subject(id)
				toks := strings.Split(strings.TrimPrefix(subj, b.evPrefix), ".")
				if len(toks) != 2 || toks[0] == "" || toks[1] == "" {
					t.Fatalf("%q: subject %q is not two tokens after the prefix", id, subj)
				}
				for _, tok := range toks {
					for i := 0; i < len(tok); i++ {
						if !safeByte(tok[i]) && tok[i] != '=' {
							t.Fatalf("%q: token %q holds %q", id, tok, tok[i])
						}
					}
				}
				if want := b.categorySubject(categoryOf(id, sep)); !strings.HasPrefix(subj, strings.TrimSuffix(want, "*")) {
					t.Errorf("%q: subject %q is not under its category's filter %q", id, subj, want)
				}
				got, catTok, err := b.streamOf(subj)
				if err != nil || got != id || catTok != toks[0] {
					t.Errorf("%q -> %q -> %q (category token %q) %v", id, subj, got, catTok, err)
				}
				if other, dup := seen[subj]; dup {
					t.Errorf("%q and %q share subject %q", id, other, subj)
				}
				seen[subj] = id
			}
		})
	}
	// The stream id layout, which old streams keep: one token, also
	// decoded by a backend of the category layout.
	old := &Backend{evPrefix: "p.e.", layout: layoutStreamID, sep: "-"}
	cat := &Backend{evPrefix: "p.e.", layout: layoutCategory, sep: "-"}
	for _, id := range ids {
		subj := old.subject(id)
		if strings.Contains(strings.TrimPrefix(subj, "p.e."), ".") {
			t.Fatalf("%q: old layout subject %q", id, subj)
		}
		if got, _, err := cat.streamOf(subj); err != nil || got != id {
			t.Errorf("old layout %q -> %q -> %q %v", id, subj, got, err)
		}
	}
}

func FuzzSubjectLayout(f *testing.F) {
	for _, s := range []string{"order-1", "a.b", "=41", "-", "x-", "-x", "ünï-1"} {
		f.Add(s, "-")
	}
	f.Add("a::b", "::")
	f.Fuzz(func(t *testing.T, id, sep string) {
		if id == "" || checkSeparator(sep) != nil {
			return
		}
		b := &Backend{evPrefix: "p.e.", layout: layoutCategory, sep: sep}
		subj := b.subject(id)
		if got, _, err := b.streamOf(subj); err != nil || got != id {
			t.Fatalf("%q (sep %q) -> %q -> %q %v", id, sep, subj, got, err)
		}
	})
}

// TestFilteredReadPushdown writes a log where one category is sparse and
// reads it filtered: the backend's cursors return only the category's
// commits (jsclient counts the messages they return), where the Store's
// own filtering reads every commit of the log; both give the same events.
// Filters of several categories merge a cursor per category, and a
// filter of types alone reads $all.
func TestFilteredReadPushdown(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("fpush"))
		s, b := m.store(t, cfg)
		if cats, sep := b.Layout(); !cats || sep != "-" {
			t.Fatalf("a new stream has layout categories=%v separator %q", cats, sep)
		}
		ctx := ctxT(t)
		commits := map[string]int{}
		total := 0
		for i := range 300 {
			cat := "cold"
			switch {
			case i%50 == 7:
				cat = "hot"
			case i%30 == 11:
				cat = "warm"
			}
			evs := makeEvents(1+i%3, 10)
			evs[0].Type = "T" + cat
			if _, err := s.Append(ctx, fmt.Sprintf("%s-%d", cat, i%7), varve.Any, evs...); err != nil {
				t.Fatal(err)
			}
			commits[cat]++
			total++
		}
		if err := s.Truncate(ctx, "hot-0", 2); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "warm-1", varve.Any); err != nil && !errors.Is(err, varve.ErrStreamNotFound) {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			f      varve.Filter
			maxMsg int // commits the cursors may return at most
		}{
			// The cursors of a category also return its markers: one
			// truncation of "hot", one delete of "warm".
			{"one category", varve.Filter{Categories: []string{"hot"}}, commits["hot"] + 1},
			{"two categories", varve.Filter{Categories: []string{"hot", "warm"}}, commits["hot"] + commits["warm"] + 2},
			{"prefix in a category", varve.Filter{StreamPrefixes: []string{"hot-3"}}, commits["hot"] + 1},
			{"category and type", varve.Filter{Categories: []string{"warm"}, Types: []string{"T"}}, commits["warm"] + 1},
			{"types alone", varve.Filter{Types: []string{"Thot"}}, total + 10},
			// More than maxMerged categories: $all, categories checked on
			// each commit.
			{"nine categories", varve.Filter{Categories: []string{"a", "b", "c", "d", "e", "f", "g", "hot", "warm"}}, total + 10},
			{"no such category", varve.Filter{Categories: []string{"none"}}, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				want := describeEvents(t, s, tc.f, true)
				before := b.c.Returned()
				got := describeEvents(t, s, tc.f, false)
				returned := int(b.c.Returned() - before)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("pushdown read %d events, the Store's own filtering %d:\n%v\n%v", len(got), len(want), got, want)
				}
				if tc.name != "no such category" && len(want) == 0 {
					t.Fatal("the filter matches nothing: the comparison proves little")
				}
				if returned > tc.maxMsg {
					t.Errorf("cursors returned %d messages, the filter's categories hold %d commits (the log %d)", returned, tc.maxMsg, total)
				}
				t.Logf("%d events; cursors returned %d messages of a log of %d commits", len(got), returned, total)
			})
		}
	})
}

// describeEvents reads f's events of the whole log in pages of 5, through
// the backend (pushdown) or the Store's own filtering (reference).
func describeEvents(t *testing.T, s *varve.Store, f varve.Filter, reference bool) []string {
	t.Helper()
	var out []string
	pos := varve.Start
	for {
		var page varve.AllPage
		var err error
		if reference {
			page, err = s.ScanFiltered(ctxT(t), pos, f, nil, varve.Limit(5))
		} else {
			page, err = s.ReadAllPage(ctxT(t), pos, nil, f, varve.Limit(5))
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			out = append(out, fmt.Sprintf("%s@%d %s %s", e.Stream, e.Version, e.Type, e.Position))
		}
		if len(page.Events) < 5 {
			return out
		}
		pos = page.Through
	}
}

// TestOldLayout opens streams written before categories were part of the
// subjects: the backend keeps their layout (it writes and reads the same
// subjects as the writer before it), refuses filtered pushdown with
// varve.ErrNotSupported, and the Store's filtered reads still return
// every matching event. An old stream without events gets the category
// layout; a separator other than the stream's fails.
func TestOldLayout(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		ctx := ctxT(t)
		cfg := testConfig(m.url, uniqueName("oldlay"))
		legacy := cfg
		legacy.legacyLayout = true
		old, oldB := m.store(t, legacy)
		for i := range 20 {
			if _, err := old.Append(ctx, fmt.Sprintf("c%d-%d", i%2, i%5), varve.Any, makeEvents(1, 10)...); err != nil {
				t.Fatal(err)
			}
		}
		if n := subjectCount(t, oldB, oldB.evPrefix+encodeID("c0-0")); n == 0 {
			t.Fatal("the legacy writer stored nothing on the one-token subject")
		}
		s, b := m.store(t, cfg)
		if cats, _ := b.Layout(); cats {
			t.Fatal("a stream holding old-layout events was given the category layout")
		}
		if _, _, err := b.ReadAllFiltered(ctx, varve.FilterQuery{Limit: 10, Filter: varve.Filter{Categories: []string{"c0"}}}, nil); !errors.Is(err, varve.ErrNotSupported) {
			t.Fatalf("ReadAllFiltered on the old layout: %v, want ErrNotSupported", err)
		}
		// Both processes write on: the same subjects, the same versions.
		if _, err := s.Append(ctx, "c0-0", varve.Exact(2), makeEvents(1, 10)...); err != nil {
			t.Fatal(err)
		}
		if _, err := old.Append(ctx, "c0-0", varve.Exact(2), makeEvents(1, 10)...); !errors.Is(err, varve.ErrWrongExpectedVersion) {
			t.Fatalf("the old writer appended at a version the new one took: %v", err)
		}
		f := varve.Filter{Categories: []string{"c0"}}
		got := describeEvents(t, s, f, false)
		want := describeEvents(t, s, f, true)
		if len(got) != 11 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("filtered read of the old layout: %d events %v, want 11 %v", len(got), got, want)
		}

		// An old stream without events is given the category layout.
		empty := testConfig(m.url, uniqueName("oldempty"))
		legacy = empty
		legacy.legacyLayout = true
		m.open(t, legacy)
		if cats, sep := m.open(t, empty).Layout(); !cats || sep != "-" {
			t.Fatalf("an empty old stream: layout categories=%v separator %q", cats, sep)
		}

		// The separator is the stream's.
		other := empty
		other.CategorySeparator = "::"
		if _, err := New(ctx, other); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Fatalf("open with another separator: %v, want ErrInvalidArgument", err)
		}
		nb := m.open(t, empty)
		if _, err := nb.Append(ctx, varve.AppendRequest{Stream: "a::b", Category: "a", Expected: varve.Any, Events: makeEvents(1, 10)}); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Fatalf("append whose category is not the stream's at the backend's separator: %v", err)
		}
	})
}
