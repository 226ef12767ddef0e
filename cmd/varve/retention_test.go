package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
)

// TestRetentionCommands: retention set, list, run and remove on a SQLite
// file, PostgreSQL and NATS: bad targets and limits are usage errors, a dry
// run removes nothing, a pass truncates to the policy and is listed, JSON
// and CSV are written, a removed policy removes nothing more.
func TestRetentionCommands(t *testing.T) {
	steps := []struct {
		name string
		args []string
		code int
		out  string // a part of stdout (code 0) or stderr
		// first and last are the versions stream "s" keeps afterwards.
		first, last varve.Version
	}{
		{"list, none", []string{"list"}, exitOK, "no pass of the scavenger recorded", 1, 10},
		{"set without a target", []string{"set", "--max-count", "3"}, exitUsage, "--stream or --category", 1, 10},
		{"set with both targets", []string{"set", "--stream", "s", "--category", "s", "--max-count", "3"}, exitUsage, "--stream or --category", 1, 10},
		{"set without a limit", []string{"set", "--stream", "s"}, exitUsage, "--exempt", 1, 10},
		{"set --exempt with a limit", []string{"set", "--stream", "s", "--exempt", "--max-count", "2"}, exitUsage, "--exempt", 1, 10},
		{"set --max-count 0", []string{"set", "--stream", "s", "--max-count", "0"}, exitUsage, "no limit", 1, 10},
		{"set --max-age -1h", []string{"set", "--stream", "s", "--max-age", "-1h"}, exitUsage, "--max-age", 1, 10},
		{"set a system stream", []string{"set", "--stream", "$parked-x", "--max-count", "2"}, exitUsage, "system streams", 1, 10},
		{"set a category with the separator", []string{"set", "--category", "s-x", "--max-count", "2"}, exitUsage, "separator", 1, 10},
		{"set", []string{"set", "--stream", "s", "--max-count", "3"}, exitOK, `the policy of stream "s" is max count 3`, 1, 10},
		{"dry run", []string{"run", "--dry-run"}, exitOK, "dry run (nothing removed)", 1, 10},
		{"run", []string{"run"}, exitOK, "7 events removed", 8, 10},
		{"list", []string{"list"}, exitOK, "last pass", 8, 10},
		{"list --csv", []string{"list", "--csv"}, exitOK, "stream,s,,3,0,false,", 8, 10},
		{"set the category", []string{"set", "--category", "s", "--max-age", "720h", "--allow-empty"}, exitOK, "max age 720h0m0s", 8, 10},
		{"remove", []string{"remove", "--stream", "s"}, exitOK, `removed the policy of stream "s"`, 8, 10},
		{"remove again", []string{"remove", "--stream", "s"}, exitFailed, "no policy", 8, 10},
		{"run --max-remove 0", []string{"run", "--max-remove", "0"}, exitUsage, "--max-remove", 8, 10},
		{"run after the removal", []string{"run"}, exitOK, "0 events removed", 8, 10},
	}
	for _, s := range createdStores(t, 10) {
		t.Run(s.name, func(t *testing.T) {
			for _, st := range steps {
				args := append([]string{"retention"}, append(st.args, "--store", s.url)...)
				r := runIn(t, args...)
				text := r.stdout
				if st.code != exitOK {
					text = r.stderr
				}
				if r.code != st.code || !strings.Contains(text, st.out) {
					t.Fatalf("%s: exit %d, want %d and %q in\n%s%s", st.name, r.code, st.code, st.out, r.stdout, r.stderr)
				}
				first, last := keptVersions(t, s.url, "s")
				if first != st.first || last != st.last {
					t.Fatalf("%s: s keeps %d..%d, want %d..%d", st.name, first, last, st.first, st.last)
				}
			}
			// --json of list: the policies and the last report.
			out := filepath.Join(t.TempDir(), "list.json")
			r := runIn(t, "retention", "list", "--store", s.url, "--json="+out)
			doc, _ := r.doc.(map[string]any)
			policies, _ := doc["policies"].([]any)
			last, _ := doc["last_report"].(map[string]any)
			if r.code != exitOK || len(policies) != 1 || last == nil || last["removed"] != 0.0 || last["streams"] != 1.0 {
				t.Fatalf("list --json: exit %d, %v", r.code, r.doc)
			}
			if p := policies[0].(map[string]any); p["category"] != "s" || p["max_age"] != "720h0m0s" || p["allow_empty"] != true {
				t.Fatalf("list --json: policy %v", p)
			}
		})
	}
}

// TestRetentionEvery: run --every makes passes until interrupted, a line
// each, and exits 130.
func TestRetentionEvery(t *testing.T) {
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "every.db"))
	s, err := open.Store(context.Background(), url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := s.Append(context.Background(), "s", varve.Any, varve.NewEvent("E", nil)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if r := runIn(t, "retention", "set", "--stream", "s", "--max-count", "1", "--store", url); r.code != exitOK {
		t.Fatalf("set: %d %s", r.code, r.stderr)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	out := &passLines{after: 3, stop: func() { cancel(errInterrupted) }}
	var errOut bytes.Buffer
	code := execute(ctx, []string{"retention", "run", "--every", "5ms", "--store", url}, out, &errOut)
	if code != exitInterrupted || out.lines < 3 || !strings.Contains(out.text.String(), "4 events removed") {
		t.Fatalf("exit %d after %d lines:\n%s%s", code, out.lines, out.text.String(), errOut.String())
	}
	if first, last := keptVersions(t, url, "s"); first != 5 || last != 5 {
		t.Fatalf("s keeps %d..%d, want 5..5", first, last)
	}
}

// passLines counts the lines written and calls stop after the after-th.
type passLines struct {
	text  bytes.Buffer
	lines int
	after int
	stop  func()
}

func (p *passLines) Write(b []byte) (int, error) {
	p.text.Write(b)
	if p.lines += bytes.Count(b, []byte("\n")); p.lines >= p.after {
		p.stop()
	}
	return len(b), nil
}

// keptVersions returns the first and last version of stream in the store
// at url; 0, 0 when it has no events.
func keptVersions(t *testing.T, url, stream string) (first, last varve.Version) {
	t.Helper()
	st, err := open.Existing(context.Background(), url, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for e, err := range st.ReadStream(context.Background(), stream) {
		if errors.Is(err, varve.ErrStreamNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = e.Version
		}
		last = e.Version
	}
	return first, last
}
