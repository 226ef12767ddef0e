package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/shred"
)

// TestEraseCommands: keys new-master makes a key the store takes; erase
// asks, erases only when confirmed, reports the counts; erasures lists
// the report; a second erase, a bad subject and a store without a master
// key are errors; keys rotate wraps the keys of an older master key again.
func TestEraseCommands(t *testing.T) {
	old := runIn(t, "keys", "new-master", "--id", "old")
	if old.code != exitOK || !strings.HasPrefix(old.stdout, "old:") || !strings.Contains(old.stderr, "store it safely") {
		t.Fatalf("keys new-master: exit %d\n%s%s", old.code, old.stdout, old.stderr)
	}
	if r := runIn(t, "keys", "new-master", "--id", "a:b"); r.code != exitUsage {
		t.Fatalf("keys new-master --id a:b: exit %d, want usage", r.code)
	}
	t.Setenv(open.MasterKeyEnv, strings.TrimSpace(old.stdout))
	url := "sqlite://" + filepath.Join(t.TempDir(), "erase.db")
	if r := runIn(t, "init", "--store", url); r.code != exitOK {
		t.Fatalf("init: exit %d\n%s", r.code, r.stderr)
	}
	ctx := context.Background()
	s, err := open.Existing(ctx, url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := open.Shredder(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"user-1", "user-1", "user-2"} {
		ev, err := sh.Seal(ctx, subject, varve.NewEvent("Registered", []byte(`{"email":"someone@example.com"}`)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, subject, varve.Any, ev); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	// Not confirmed: the key stays.
	oldIn := confirmIn
	t.Cleanup(func() { confirmIn = oldIn })
	confirmIn = strings.NewReader("user-2\n")
	if r := runIn(t, "erase", "--subject", "user-1", "--store", url); r.code != exitFailed || !strings.Contains(r.stderr, "not confirmed") {
		t.Fatalf("erase, not confirmed: exit %d\n%s", r.code, r.stderr)
	}
	confirmIn = strings.NewReader("user-1\n")
	out := filepath.Join(t.TempDir(), "erase.json")
	r := runIn(t, "erase", "--subject", "user-1", "--count", "--store", url, "--json="+out)
	doc, _ := r.doc.(map[string]any)
	if r.code != exitOK || doc["subject"] != "user-1" || doc["events"] != 2.0 || doc["counted"] != true || doc["master"] != "old" {
		t.Fatalf("erase: exit %d, %v\n%s", r.code, r.doc, r.stderr)
	}
	steps := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"again", []string{"erase", "--subject", "user-1", "--yes"}, exitFailed, "nothing to erase"},
		{"a bad subject", []string{"erase", "--subject", "", "--yes"}, exitUsage, "--subject"},
		{"no counting", []string{"erase", "--subject", "user-2", "--yes"}, exitOK, "not counted"},
		{"list", []string{"erasures"}, exitOK, "2 erasures"},
		{"list one subject", []string{"erasures", "--subject", "user-1", "--csv"}, exitOK, ",user-1,"},
		{"list a negative limit", []string{"erasures", "--limit", "-1"}, exitUsage, "--limit"},
	}
	for _, st := range steps {
		r := runIn(t, append(st.args, "--store", url)...)
		text := r.stdout
		if st.code != exitOK {
			text = r.stderr
		}
		if r.code != st.code || !strings.Contains(text, st.out) {
			t.Fatalf("%s: exit %d, want %d and %q in\n%s%s", st.name, r.code, st.code, st.out, r.stdout, r.stderr)
		}
	}
	list := filepath.Join(t.TempDir(), "erasures.json")
	r = runIn(t, "erasures", "--store", url, "--limit", "1", "--json="+list)
	doc, _ = r.doc.(map[string]any)
	if es, _ := doc["erasures"].([]any); r.code != exitOK || len(es) != 1 || es[0].(map[string]any)["subject"] != "user-2" {
		t.Fatalf("erasures --json: exit %d, %v", r.code, r.doc)
	}

	// A key sealed under the old master key, then the rotation to a new one.
	s, err = open.Existing(ctx, url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sh, _ = open.Shredder(s)
	if _, err := sh.SealBytes(ctx, "user-3", []byte("x")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	next := runIn(t, "keys", "new-master", "--id", "new")
	t.Setenv(open.MasterKeyEnv, strings.TrimSpace(next.stdout))
	t.Setenv(open.PreviousMasterKeysEnv, strings.TrimSpace(old.stdout))
	rot := filepath.Join(t.TempDir(), "rotate.json")
	r = runIn(t, "keys", "rotate", "--store", url, "--json="+rot)
	if doc, _ := r.doc.(map[string]any); r.code != exitOK || doc["rewrapped"] != 1.0 {
		t.Fatalf("keys rotate: exit %d, %v\n%s", r.code, r.doc, r.stderr)
	}
	t.Setenv(open.PreviousMasterKeysEnv, "")
	if r := runIn(t, "erase", "--subject", "user-3", "--yes", "--store", url); r.code != exitOK {
		t.Fatalf("erase under the new master key alone: exit %d\n%s", r.code, r.stderr)
	}
	t.Setenv(open.MasterKeyEnv, "")
	if r := runIn(t, "erase", "--subject", "user-4", "--yes", "--store", url); r.code != exitFailed || !strings.Contains(r.stderr, "no master key") {
		t.Fatalf("erase without a master key: exit %d\n%s", r.code, r.stderr)
	}
	if r := runIn(t, "erasures", "--store", url); r.code != exitOK || !strings.Contains(r.stdout, "3 erasures") {
		t.Fatalf("erasures without a master key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestEraseOutcome: an error after the key is destroyed (counting, or
// recording the report, failed) still prints the report and fails the
// command; an error before it is the command's error alone.
func TestEraseOutcome(t *testing.T) {
	errCount := errors.New("reads of $all fail")
	cases := []struct {
		name        string
		r           shred.Report
		err         error
		run, failed error
	}{
		{"erased", shred.Report{Key: uuid.New()}, nil, nil, nil},
		{"not erased", shred.Report{}, shred.ErrNothingToErase, shred.ErrNothingToErase, nil},
		{"erased, counting failed", shred.Report{Key: uuid.New(), CountError: errCount.Error()}, errCount, nil, errCount},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run, failed := eraseOutcome(tc.r, tc.err)
			if run != tc.run || failed != tc.failed {
				t.Fatalf("eraseOutcome: %v, %v; want %v, %v", run, failed, tc.run, tc.failed)
			}
		})
	}
}
