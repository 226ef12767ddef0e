package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
	"github.com/varve-go/varve/workflow"
)

type noSender struct{}

func (noSender) Send(context.Context, workflow.Command) error { return nil }

// failingInstance makes an instance of workflow "wfcli" whose first input
// failed in Decide.
func failingInstance(t *testing.T, url string) string {
	return failingInstanceSep(t, url, "")
}

// failingInstanceSep is failingInstance on a store with category
// separator sep ("" the default).
func failingInstanceSep(t *testing.T, url, sep string) string {
	t.Helper()
	ctx := context.Background()
	s, err := open.Store(ctx, url, varve.Config{CategorySeparator: sep})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	def := workflow.Definition[string]{
		Name:   "wfcli",
		Route:  func(e *varve.RecordedEvent) (string, bool) { return "o1", e.Type == "Placed" },
		Evolve: func(st string, e *varve.RecordedEvent) string { return e.Type },
		Decide: func(string, workflow.Input) (workflow.Decision, error) {
			return workflow.Decision{}, errors.New("stock service down\x1b[2J")
		},
	}
	r, err := workflow.NewRunner(s, def, noSender{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, "orders-1", varve.Any, varve.NewEvent("Placed", []byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range s.ReadStream(ctx, "orders-1", varve.From(res.FirstVersion)) {
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Handle(ctx, e); err == nil {
			t.Fatal("Decide failed, Handle did not")
		}
	}
	return r.Stream("o1")
}

// TestWorkflowsCommands: list, show, retry and cancel an instance whose
// input failed, on a SQLite file, PostgreSQL and NATS; the store's text
// is made safe for the terminal.
func TestWorkflowsCommands(t *testing.T) {
	for _, s := range createdStores(t, 0) {
		t.Run(s.name, func(t *testing.T) {
			stream := failingInstance(t, s.url)
			steps := []struct {
				name string
				args []string
				code int
				out  string
			}{
				{"list", []string{"list", "wfcli"}, exitOK, "stock service down"},
				{"list --csv", []string{"list", "wfcli", "--csv"}, exitOK, stream + ",1,,false,0,0,,0,"},
				{"list --limit 0", []string{"list", "wfcli", "--limit", "0"}, exitUsage, "--limit"},
				{"show", []string{"show", stream}, exitOK, "last error at"},
				{"show a missing instance", []string{"show", "wfcli-none"}, exitFailed, "not found"},
				{"retry", []string{"retry", stream}, exitOK, "apply input"},
				{"cancel", []string{"cancel", stream, "--yes", "--reason", "by hand"}, exitOK, "cancelled " + stream},
				{"cancel again", []string{"cancel", stream, "--yes"}, exitFailed, "cancelled"},
				{"retry a cancelled instance", []string{"retry", stream}, exitFailed, "cancelled"},
				{"show the cancelled instance", []string{"show", stream}, exitOK, "cancelled: by hand"},
			}
			for _, st := range steps {
				r := runIn(t, append([]string{"workflows"}, append(st.args, "--store", s.url)...)...)
				text := r.stdout
				if st.code != exitOK {
					text = r.stderr
				}
				if r.code != st.code || !strings.Contains(text, st.out) {
					t.Fatalf("%s: exit %d, want %d and %q in\n%s%s", st.name, r.code, st.code, st.out, r.stdout, r.stderr)
				}
				if strings.Contains(r.stdout+r.stderr, "\x1b") {
					t.Fatalf("%s: an escape sequence from the store reached the terminal:\n%q", st.name, r.stdout)
				}
			}
		})
	}
}

// TestWorkflowsSeparator: on a store whose application uses another
// category separator, the commands find the instances with
// --category-separator, and find none without it; a separator the store
// refuses is a usage error.
func TestWorkflowsSeparator(t *testing.T) {
	url := "sqlite://" + t.TempDir() + "/sep.db"
	stream := failingInstanceSep(t, url, ".")
	if stream != "wfcli.o1" {
		t.Fatalf("instance stream %q, want wfcli.o1", stream)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"with the separator", []string{"list", "wfcli", "--category-separator", "."}, exitOK, "stock service down"},
		{"show with the separator", []string{"show", stream, "--category-separator", "."}, exitOK, "last error at"},
		{"without it", []string{"list", "wfcli", "--json"}, exitOK, `"instances":[]`},
		{"a separator the store refuses", []string{"list", "wfcli", "--category-separator", "longer than 8"}, exitUsage, "--category-separator"},
	} {
		r := runIn(t, append([]string{"workflows"}, append(tc.args, "--store", url)...)...)
		text := r.stdout
		if tc.code != exitOK {
			text = r.stderr
		}
		if r.code != tc.code || !strings.Contains(strings.ReplaceAll(text, " ", ""), strings.ReplaceAll(tc.out, " ", "")) {
			t.Fatalf("%s: exit %d, want %d and %q in\n%s%s", tc.name, r.code, tc.code, tc.out, r.stdout, r.stderr)
		}
	}
}
