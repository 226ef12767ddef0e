package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
)

// TestStreamLifecycle: streams truncate, delete and tombstone on a SQLite
// file, PostgreSQL and NATS: each asks for the stream's id and changes
// nothing without it, prints plain JSON, honours --expected, and refuses
// system streams and streams that are not there.
func TestStreamLifecycle(t *testing.T) {
	old := confirmIn
	t.Cleanup(func() { confirmIn = old })
	type state struct {
		versions        []varve.Version // the events left, by version
		deleted, tombed bool
	}
	steps := []struct {
		name   string
		args   []string // after the command's words and the stream
		answer string   // typed on stdin ("": --yes is among args, or nothing is asked)
		code   int
		output string // a part of stderr (code 1 or 2) or of the JSON (code 0)
		after  state
	}{
		{"truncate, wrong answer", []string{"truncate", "s", "--before", "3"}, "t\n", exitFailed, `not confirmed: stream "s" is as it was`, state{versions: []varve.Version{1, 2, 3, 4, 5}}},
		{"truncate, no answer", []string{"truncate", "s", "--before", "3"}, "", exitFailed, "not confirmed", state{versions: []varve.Version{1, 2, 3, 4, 5}}},
		{"truncate", []string{"truncate", "s", "--before", "3"}, "s\n", exitOK, `"before": 3`, state{versions: []varve.Version{3, 4, 5}}},
		{"truncate, --yes", []string{"truncate", "s", "--before", "4", "--yes"}, "", exitOK, `"action": "truncate"`, state{versions: []varve.Version{4, 5}}},
		{"truncate without --before", []string{"truncate", "s", "--yes"}, "", exitUsage, "--before", state{versions: []varve.Version{4, 5}}},
		{"truncate --before 0", []string{"truncate", "s", "--before", "0", "--yes"}, "", exitUsage, "--before 0", state{versions: []varve.Version{4, 5}}},
		{"delete, stale --expected", []string{"delete", "s", "--expected", "4", "--yes"}, "", exitFailed, "expected 4, actual 5", state{versions: []varve.Version{4, 5}}},
		{"delete, wrong answer", []string{"delete", "s"}, "x\n", exitFailed, "not confirmed", state{versions: []varve.Version{4, 5}}},
		{"delete", []string{"delete", "s", "--expected", "5"}, "  s  \n", exitOK, `"version": 5`, state{deleted: true}},
		{"delete again", []string{"delete", "s", "--yes"}, "", exitFailed, "stream not found", state{deleted: true}},
		{"truncate of a deleted stream", []string{"truncate", "s", "--before", "2", "--yes"}, "", exitFailed, "stream not found", state{deleted: true}},
		{"tombstone, wrong answer", []string{"tombstone", "s"}, "S\n", exitFailed, "not confirmed", state{deleted: true}},
		{"tombstone", []string{"tombstone", "s"}, "s\n", exitOK, `"action": "tombstone"`, state{deleted: true, tombed: true}},
		{"tombstone again", []string{"tombstone", "s", "--yes"}, "", exitFailed, "tombstoned already", state{deleted: true, tombed: true}},
		{"delete of a tombstone", []string{"delete", "s", "--yes"}, "", exitFailed, "stream deleted", state{deleted: true, tombed: true}},
		{"system stream", []string{"delete", "$parked-x", "--yes"}, "", exitUsage, "system streams", state{deleted: true, tombed: true}},
		{"bad --expected", []string{"tombstone", "s", "--expected", "last", "--yes"}, "", exitUsage, "--expected", state{deleted: true, tombed: true}},
		{"missing stream", []string{"truncate", "none", "--before", "2", "--yes"}, "", exitFailed, "stream not found", state{deleted: true, tombed: true}},
	}
	for _, s := range createdStores(t, 5) {
		t.Run(s.name, func(t *testing.T) {
			check := func(step string, want state) {
				t.Helper()
				st, err := open.Existing(context.Background(), s.url, varve.Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				info, err := st.StreamInfo(context.Background(), "s")
				if err != nil || info.Deleted != want.deleted || info.Tombstoned != want.tombed {
					t.Fatalf("%s: info %+v, %v; want %+v", step, info, err, want)
				}
				var got []varve.Version
				for e, err := range st.ReadStream(context.Background(), "s") {
					if errors.Is(err, varve.ErrStreamNotFound) || errors.Is(err, varve.ErrStreamDeleted) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, e.Version)
				}
				if len(got) != len(want.versions) {
					t.Fatalf("%s: versions %v, want %v", step, got, want.versions)
				}
				for i := range got {
					if got[i] != want.versions[i] {
						t.Fatalf("%s: versions %v, want %v", step, got, want.versions)
					}
				}
			}
			for _, step := range steps {
				confirmIn = strings.NewReader(step.answer)
				r := runIn(t, append(append([]string{"streams"}, step.args...), "--store", s.url, "--json")...)
				if r.code != step.code {
					t.Fatalf("%s: exit %d, want %d\n%s%s", step.name, r.code, step.code, r.stdout, r.stderr)
				}
				if step.code == exitOK {
					m := decode(t, r)
					if m["stream"] != "s" || m["action"] != step.args[0] || !strings.Contains(r.stdout, step.output) {
						t.Fatalf("%s: %s", step.name, r.stdout)
					}
				} else if r.stdout != "" || !strings.Contains(r.stderr, step.output) {
					t.Fatalf("%s: stdout %q, stderr %q; want nothing and %q", step.name, r.stdout, r.stderr, step.output)
				}
				asked := strings.Contains(r.stderr, "Type the stream's id to confirm")
				if wantAsked := step.answer != "" || step.name == "truncate, no answer"; asked != wantAsked {
					t.Fatalf("%s: asked %v, want %v\n%s", step.name, asked, wantAsked, r.stderr)
				}
				check(step.name, step.after)
			}
			st, err := open.Existing(context.Background(), s.url, varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Append(context.Background(), "s", varve.Any, varve.NewEvent("E", nil)); !errors.Is(err, varve.ErrStreamDeleted) {
				t.Fatalf("append to the tombstone: %v", err)
			}
		})
	}
}

// TestStreamLifecycleText: the question names the stream as the store
// has it, quoted, and the outcome is a line of text; a stream never
// written can be tombstoned (on the memory store, which a run starts
// empty), not deleted.
func TestStreamLifecycleText(t *testing.T) {
	old := confirmIn
	t.Cleanup(func() { confirmIn = old })
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "new.db"))
	st, err := open.Store(context.Background(), url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), "s", varve.NoStream, varve.NewEvent("E", nil), varve.NewEvent("E", nil), varve.NewEvent("E", nil)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	confirmIn = strings.NewReader("s\n")
	r := runIn(t, "streams", "truncate", "s", "--before", "2", "--store", url)
	if r.code != exitOK || !strings.Contains(r.stderr, `Remove the events of "s" on sqlite new.db below version 2? (It is at version 3`) ||
		r.stdout != "truncated s before version 2 (its version stays 3)\n" {
		t.Fatalf("truncate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	confirmIn = strings.NewReader("s\n")
	if r := runIn(t, "streams", "delete", "s", "--store", url); r.code != exitOK || !strings.HasPrefix(r.stdout, "deleted s (it was at version 3") {
		t.Fatalf("delete: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"tombstone", "never", "--yes"}, exitOK, "tombstoned never (it was at version 0"},
		{[]string{"delete", "never", "--yes"}, exitFailed, "stream not found"},
		{[]string{"truncate", "never", "--before", "1", "--yes"}, exitFailed, "stream not found"},
	} {
		r := runIn(t, append(append([]string{"streams"}, tc.args...), "--store", "memory:")...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.out) {
			t.Errorf("%v on memory: exit %d, want %d and %q\n%s%s", tc.args, r.code, tc.code, tc.out, r.stdout, r.stderr)
		}
	}
}
