package backendtest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/varve-go/varve"
)

// testListStreams: the streams of a prefix come back in byte order, whole
// and once each over pages of any size, with their state (live, deleted,
// tombstoned), system streams only when asked for; the prefix is a plain
// byte prefix (no pattern characters, no escaping artefacts).
func testListStreams(t *testing.T, f Factory) {
	s := store(t, f)
	ls := s.Streams()
	if lacks(t, f, s, varve.Capabilities{ListStreams: true}) {
		_, err := ls.List(ctxFor(t), varve.ListQuery{}, false)
		wantErr(t, "list without the capability", err, varve.ErrNotSupported)
		t.Skipf("backend %q does not implement varve.StreamLister", s.Features().Name)
	}
	pfx := prefix(t)
	// Names around the characters that SQL patterns, subject tokens and
	// escapes treat specially, and multi-byte UTF-8.
	suffixes := []string{"a", "a-1", "a-2", "a.b", "a_b", "a%b", "a=2E", "a b", "aa", "b", "B", "é", "z/y", "~"}
	want := map[string]varve.StreamInfo{}
	for i, sfx := range suffixes {
		res := mustAppend(t, s, pfx+sfx, varve.NoStream, events("E", i%3+1)...)
		want[pfx+sfx] = varve.StreamInfo{Stream: pfx + sfx, Version: res.LastVersion, LastPosition: res.Position}
	}
	if err := s.Delete(ctxFor(t), pfx+"a-2", varve.Any); err != nil {
		t.Fatal(err)
	}
	want[pfx+"a-2"] = varve.StreamInfo{Stream: pfx + "a-2", Deleted: true}
	if err := s.Tombstone(ctxFor(t), pfx+"b", varve.Any); err != nil {
		t.Fatal(err)
	}
	want[pfx+"b"] = varve.StreamInfo{Stream: pfx + "b", Deleted: true, Tombstoned: true}
	sys := varve.SystemPrefix + pfx + "sys"
	if _, err := s.System().Append(ctxFor(t), sys, varve.NoStream, events("S", 1)...); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)

	list := func(q varve.ListQuery, system bool) []varve.StreamInfo {
		t.Helper()
		var out []varve.StreamInfo
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatalf("list %+v: no end after 100 pages", q)
			}
			page, err := ls.List(ctxFor(t), q, system)
			if err != nil {
				t.Fatalf("list %+v: %v", q, err)
			}
			if q.Limit > 0 && len(page.Streams) > q.Limit {
				t.Fatalf("list %+v: %d streams in a page", q, len(page.Streams))
			}
			out = append(out, page.Streams...)
			if page.Next == "" {
				return out
			}
			q.After = page.Next
		}
	}
	streamNames := func(infos []varve.StreamInfo) []string {
		out := make([]string, len(infos))
		for i, info := range infos {
			out[i] = info.Stream
		}
		return out
	}
	for _, limit := range []int{0, 1, 2, 3, 5, len(names), len(names) + 1} {
		got := list(varve.ListQuery{Prefix: pfx, Limit: limit}, false)
		if !slices.Equal(streamNames(got), names) {
			t.Fatalf("limit %d: listed\n%q\nwant\n%q", limit, streamNames(got), names)
		}
		if limit != 2 {
			continue
		}
		for _, info := range got {
			w := want[info.Stream]
			if info.Version != w.Version || info.Deleted != w.Deleted || info.Tombstoned != w.Tombstoned ||
				(!w.Deleted && info.LastPosition != w.LastPosition) {
				t.Fatalf("listed %+v, want %+v", info, w)
			}
			one, err := s.StreamInfo(ctxFor(t), info.Stream)
			if err != nil {
				t.Fatal(err)
			}
			if one.Version != info.Version || one.LastPosition != info.LastPosition || one.Deleted != info.Deleted ||
				!one.CreatedAt.Equal(info.CreatedAt) || !one.UpdatedAt.Equal(info.UpdatedAt) {
				t.Fatalf("listed %+v, StreamInfo says %+v", info, one)
			}
		}
	}
	// Narrower prefixes, a cursor, and prefixes that match nothing.
	cases := []struct {
		q    varve.ListQuery
		want []string
	}{
		{varve.ListQuery{Prefix: pfx + "a"}, filter(names, pfx+"a")},
		{varve.ListQuery{Prefix: pfx + "a-"}, []string{pfx + "a-1", pfx + "a-2"}},
		{varve.ListQuery{Prefix: pfx + "a%"}, []string{pfx + "a%b"}},
		{varve.ListQuery{Prefix: pfx + "a_"}, []string{pfx + "a_b"}},
		{varve.ListQuery{Prefix: pfx + "a."}, []string{pfx + "a.b"}},
		{varve.ListQuery{Prefix: pfx + "a="}, []string{pfx + "a=2E"}},
		{varve.ListQuery{Prefix: pfx + "é"}, []string{pfx + "é"}},
		{varve.ListQuery{Prefix: pfx + "A"}, nil},
		{varve.ListQuery{Prefix: pfx + "a", After: pfx + "a.b"}, filter(names[slices.Index(names, pfx+"a.b")+1:], pfx+"a")},
		{varve.ListQuery{Prefix: pfx, After: pfx + "~"}, []string{pfx + "é"}}, // 0xC3 sorts after "~"
		{varve.ListQuery{Prefix: pfx + "zz"}, nil},
	}
	for _, c := range cases {
		if got := streamNames(list(c.q, false)); !slices.Equal(got, c.want) {
			t.Errorf("list %+v:\n got %q\nwant %q", c.q, got, c.want)
		}
	}
	// System streams: left out unless asked for, or named by the prefix.
	if got := streamNames(list(varve.ListQuery{Prefix: varve.SystemPrefix + pfx}, false)); !slices.Equal(got, []string{sys}) {
		t.Errorf("list of the system prefix: %q, want %q", got, sys)
	}
	all := streamNames(list(varve.ListQuery{Limit: varve.MaxListLimit}, true))
	if !slices.Contains(all, sys) || !slices.Contains(all, pfx+"a") {
		t.Errorf("a list of every stream with system streams lacks %q or %q", sys, pfx+"a")
	}
	if !slices.IsSorted(all) {
		t.Errorf("a list of every stream is not in byte order")
	}
	for _, n := range streamNames(list(varve.ListQuery{Limit: varve.MaxListLimit}, false)) {
		if strings.HasPrefix(n, varve.SystemPrefix) {
			t.Errorf("system stream %q listed without asking", n)
		}
	}
	// Bad input is refused by the Store before the backend sees it.
	for _, q := range []varve.ListQuery{{Limit: -1}, {Limit: varve.MaxListLimit + 1}, {Prefix: "a\x00"}, {After: "\xff"}, {Prefix: strings.Repeat("p", varve.MaxStreamIDLen+1)}} {
		if _, err := ls.List(ctxFor(t), q, false); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("list %+v: got %v, want ErrInvalidArgument", q, err)
		}
	}
}

// testListCheckpoints: checkpoints come back by name in byte order, whole
// over pages, with their positions.
func testListCheckpoints(t *testing.T, f Factory) {
	s := store(t, f)
	cs := s.Checkpoints()
	if lacks(t, f, s, varve.Capabilities{ListCheckpoints: true}) {
		_, err := cs.List(ctxFor(t), varve.ListQuery{})
		wantErr(t, "list without the capability", err, varve.ErrNotSupported)
		t.Skipf("backend %q does not implement varve.CheckpointLister", s.Features().Name)
	}
	pfx := prefix(t)
	names := []string{pfx + "a", pfx + "a.b", pfx + "a b", pfx + "a%", pfx + "b", pfx + "é"}
	for i, n := range names {
		if err := cs.Save(ctxFor(t), n, varve.Position{Commit: uint64(i), Seq: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// Saved twice: listed once, with the newer position.
	if err := cs.Save(ctxFor(t), pfx+"b", varve.Position{Seq: 99}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	for _, limit := range []int{0, 1, 4, len(names)} {
		var got []varve.NamedPosition
		q := varve.ListQuery{Prefix: pfx, Limit: limit}
		for {
			page, err := cs.List(ctxFor(t), q)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.Checkpoints...)
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
		if len(got) != len(names) {
			t.Fatalf("limit %d: %d checkpoints, want %d: %+v", limit, len(got), len(names), got)
		}
		for i, cp := range got {
			if cp.Name != names[i] {
				t.Fatalf("limit %d: checkpoint %d is %q, want %q", limit, i, cp.Name, names[i])
			}
			pos, _, err := cs.Load(ctxFor(t), cp.Name)
			if err != nil || pos != cp.Position {
				t.Fatalf("listed %q at %s, loads at %s (%v)", cp.Name, cp.Position, pos, err)
			}
		}
	}
	page, err := cs.List(ctxFor(t), varve.ListQuery{Prefix: pfx + "a%"})
	if err != nil || len(page.Checkpoints) != 1 || page.Checkpoints[0].Name != pfx+"a%" {
		t.Fatalf("list of prefix %q: %+v %v", pfx+"a%", page, err)
	}
}

func filter(names []string, pfx string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, pfx) {
			out = append(out, n)
		}
	}
	return out
}
