package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/workload"
)

// TestSubjectLayout checks the category layout's tokens: every stream id
// maps to two subject tokens, the first of which is its category's, and
// back; distinct ids give distinct subjects.
func TestSubjectLayout(t *testing.T) {
	ids := []string{"order-42", "order", "order-", "-", "-42", "--", "a-b-c", "a.b-c.d", "=", "=-=", "x y/z-ü", "\xff-\x00", "order::1", "::", "a::b::c", "::x"}
	for _, sep := range []string{"-", "::"} {
		t.Run(sep, func(t *testing.T) {
			b := &Backend{evPrefix: "p.e.", sep: sep}
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
	// A subject of the old layout, one token, is no stream's.
	b := &Backend{evPrefix: "p.e.", sep: "-"}
	if got, _, err := b.streamOf("p.e." + encodeID("order-42")); !errors.Is(err, errBadToken) {
		t.Errorf("one-token subject decoded as %q, %v", got, err)
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
		b := &Backend{evPrefix: "p.e.", sep: sep}
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
		if sep := b.CategorySeparator(); sep != "-" {
			t.Fatalf("a new stream has separator %q", sep)
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
	if reference {
		scan, err := workload.Scanning(s)
		if err != nil {
			t.Fatal(err)
		}
		defer scan.Close()
		s = scan
	}
	for {
		page, err := s.ReadAllPage(ctxT(t), pos, nil, f, varve.Limit(5))
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

// TestCategorySeparator: a stream keeps the separator it was created
// with. A backend opened without one takes the stream's, one opened with
// another fails, and so does an append whose category is not the stream
// id's at the stream's separator.
func TestCategorySeparator(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		ctx := ctxT(t)
		for _, sep := range []string{"", "::"} {
			cfg := testConfig(m.url, uniqueName("sep"))
			cfg.CategorySeparator = sep
			m.open(t, cfg)
			want := cmp.Or(sep, varve.DefaultCategorySeparator)
			cfg.CategorySeparator = ""
			b := m.open(t, cfg)
			if got := b.CategorySeparator(); got != want {
				t.Fatalf("created with %q: separator %q, want %q", sep, got, want)
			}
			other := cfg
			other.CategorySeparator = "/"
			if _, err := New(ctx, other); !errors.Is(err, varve.ErrInvalidArgument) {
				t.Fatalf("created with %q, opened with %q: %v, want ErrInvalidArgument", sep, other.CategorySeparator, err)
			}
			stream := "a" + want + "b" + "::c"
			if _, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Category: "a" + want + "b", Expected: varve.Any, Events: makeEvents(1, 10)}); !errors.Is(err, varve.ErrInvalidArgument) {
				t.Fatalf("append to %q as category %q at separator %q: %v, want ErrInvalidArgument", stream, "a"+want+"b", want, err)
			}
			if _, err := b.Append(ctx, varve.AppendRequest{Stream: stream, Category: "a", Expected: varve.Any, Events: makeEvents(1, 10)}); err != nil {
				t.Fatalf("append to %q as category %q: %v", stream, "a", err)
			}
		}
	})
}

// TestOldLayoutRefused: a JetStream stream of the subject layout before
// categories (one token per stream id) fails New with ErrOldLayout, which
// is varve.ErrNotSupported, whichever way it shows: no subject for the
// layout marker (created by a version before the marker), a marker that
// names the old layout, or old-layout events and no marker yet. A stream
// without direct gets (which only older versions added in place) fails
// with varve.ErrInvalidArgument. No event subject is written.
func TestOldLayoutRefused(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		if m.noBatch {
			t.Skip("New makes no batched gets")
		}
		nc, err := natsgo.Connect(m.url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t)
		for _, tc := range []struct {
			name     string
			marker   []byte // nil: none
			noL      bool   // the stream has no <prefix>.l subject
			noDirect bool   // the stream has no direct gets
			want     []error
		}{
			{"no marker subject", nil, true, false, []error{ErrOldLayout, varve.ErrNotSupported}},
			{"old marker", []byte{layoutStreamID, '-'}, false, false, []error{ErrOldLayout, varve.ErrNotSupported}},
			{"events, no marker", nil, false, false, []error{ErrOldLayout, varve.ErrNotSupported}},
			{"no direct gets", []byte{layoutCategory, '-'}, false, true, []error{varve.ErrInvalidArgument}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cfg := testConfig(m.url, uniqueName("oldlay"))
				p := cfg.Prefix
				subjects := []string{p + ".e.>", p + ".c.>", p + ".f"}
				if !tc.noL {
					subjects = append(subjects, p+".l")
				}
				// Memory storage: the layout does not depend on it, and the
				// in-process server under load sometimes fails to create a
				// file store (see open).
				if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
					Name: cfg.Stream, Subjects: subjects, Storage: jetstream.MemoryStorage,
					AllowDirect: !tc.noDirect, Duplicates: DefaultDuplicateWindow,
					RePublish: &jetstream.RePublish{Source: p + ".e.>", Destination: p + ".w.>", HeadersOnly: true},
				}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Stream) })
				if tc.marker != nil {
					if _, err := js.Publish(ctx, p+".l", tc.marker); err != nil {
						t.Fatal(err)
					}
				}
				// An event message where the old layout put stream order-1.
				oldSubj := p + ".e." + encodeID("order-1")
				if _, err := js.Publish(ctx, oldSubj, []byte("old commit")); err != nil {
					t.Fatal(err)
				}
				for i := range 2 { // the second New reads what the first decided
					b, err := New(ctx, cfg)
					if err == nil {
						_ = b.Close()
					}
					for _, want := range tc.want {
						if !errors.Is(err, want) {
							t.Fatalf("New #%d: %v, want %v", i+1, err, tc.want)
						}
					}
					t.Log(err)
				}
				s, err := js.Stream(ctx, cfg.Stream)
				if err != nil {
					t.Fatal(err)
				}
				info, err := s.Info(ctx, jetstream.WithSubjectFilter(p+".e.>"))
				if err != nil {
					t.Fatal(err)
				}
				if n := info.State.Msgs; len(info.State.Subjects) != 1 || info.State.Subjects[oldSubj] != 1 {
					t.Fatalf("event subjects after New: %v (%d messages), want only %s", info.State.Subjects, n, oldSubj)
				}
			})
		}
	})
}
