package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/open"
)

// TestAppend: varve append on a SQLite file, PostgreSQL and NATS: data
// from the flag, a file or stdin, JSON checked unless --raw, expected
// versions, idempotent re-sends of an id, and a re-send with other data
// refused; every refused append writes nothing.
func TestAppend(t *testing.T) {
	old := appendIn
	t.Cleanup(func() { appendIn = old })
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "data.json")
	if err := os.WriteFile(jsonFile, []byte(`{"from":"file"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	binFile := filepath.Join(dir, "data.bin")
	binary := []byte{0xff, 0x00, 0x1b, 'x'}
	if err := os.WriteFile(binFile, binary, 0o644); err != nil {
		t.Fatal(err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	const id = "0190d5a4-0000-7000-8000-000000000001"
	type want struct {
		code    int
		version float64 // of the event appended, when code is 0
		existed bool
		stderr  string // a part of it, when code is not 0
	}
	steps := []struct {
		name  string
		args  []string
		stdin string // "": no stdin (a terminal)
		data  []byte // the event's data as stored, when code is 0 and it is not a re-send
		want  want
	}{
		{"data flag", []string{"--type", "Placed", "--data", `{"sku":"A-1"}`, "--expected", "no-stream"}, "", []byte(`{"sku":"A-1"}`), want{code: 0, version: 1}},
		{"data file", []string{"--type", "Paid", "--data-file", jsonFile, "--expected", "1"}, "", []byte(`{"from":"file"}`), want{code: 0, version: 2}},
		{"stdin", []string{"--type", "Shipped", "--expected", "exists"}, `{"from":"stdin"}`, []byte(`{"from":"stdin"}`), want{code: 0, version: 3}},
		{"data file from stdin", []string{"--type", "Noted", "--data-file", "-", "--expected", "stream-exists", "--metadata", `{"by":"cli"}`}, `[1,2]`, []byte(`[1,2]`), want{code: 0, version: 4}},
		{"raw bytes", []string{"--type", "Blob", "--data-file", binFile, "--raw"}, "", binary, want{code: 0, version: 5}},
		{"no data", []string{"--type", "Ping", "--expected", "5"}, "", nil, want{code: 0, version: 6}},
		{"with id", []string{"--type", "Once", "--data", `{"n":1}`, "--id", id}, "", []byte(`{"n":1}`), want{code: 0, version: 7}},
		{"same id again", []string{"--type", "Once", "--data", `{"n":1}`, "--id", id}, "", nil, want{code: 0, version: 7, existed: true}},
		{"same id, other data", []string{"--type", "Once", "--data", `{"n":2}`, "--id", id}, "", nil, want{code: exitFailed, stderr: "duplicate event id"}},
		{"same id, other type", []string{"--type", "Twice", "--data", `{"n":1}`, "--id", id}, "", nil, want{code: exitFailed, stderr: "duplicate event id"}},
		{"wrong expected version", []string{"--type", "Late", "--data", `{}`, "--expected", "3"}, "", nil, want{code: exitFailed, stderr: "expected 3, actual 7"}},
		{"no-stream of a stream", []string{"--type", "Late", "--data", `{}`, "--expected", "no-stream"}, "", nil, want{code: exitFailed, stderr: "wrong expected version"}},
		{"data not JSON", []string{"--type", "Bad", "--data", `{"sku":`}, "", nil, want{code: exitUsage, stderr: "--data: not JSON"}},
		{"stdin not JSON", []string{"--type", "Bad"}, "sku=A-1", nil, want{code: exitUsage, stderr: "stdin: not JSON"}},
		{"file not JSON", []string{"--type", "Bad", "--data-file", binFile}, "", nil, want{code: exitUsage, stderr: "not UTF-8"}},
		{"two values", []string{"--type", "Bad", "--data", `{} {}`}, "", nil, want{code: exitUsage, stderr: "more than one value"}},
		{"metadata not JSON", []string{"--type", "Bad", "--data", `{}`, "--metadata", "by=cli"}, "", nil, want{code: exitUsage, stderr: "--metadata: not JSON"}},
		{"data and data file", []string{"--type", "Bad", "--data", `{}`, "--data-file", jsonFile}, "", nil, want{code: exitUsage, stderr: "give one of them"}},
		{"missing file", []string{"--type", "Bad", "--data-file", filepath.Join(dir, "none")}, "", nil, want{code: exitUsage, stderr: "--data-file"}},
		{"no type", []string{"--data", `{}`}, "", nil, want{code: exitUsage, stderr: "--type"}},
		{"bad id", []string{"--type", "Bad", "--id", "nope"}, "", nil, want{code: exitUsage, stderr: "--id"}},
		{"nil id", []string{"--type", "Bad", "--id", "00000000-0000-0000-0000-000000000000"}, "", nil, want{code: exitUsage, stderr: "--id"}},
		{"bad expected", []string{"--type", "Bad", "--expected", "latest"}, "", nil, want{code: exitUsage, stderr: "--expected"}},
	}
	for _, s := range createdStores(t, 0) {
		t.Run(s.name, func(t *testing.T) {
			written := 0 // events appended so far
			for _, step := range steps {
				appendIn = strings.NewReader(step.stdin)
				if step.stdin == "" {
					appendIn = devNull // a character device, as a terminal is: no data
				}
				r := runIn(t, append([]string{"append", "order-1", "--store", s.url, "--json"}, step.args...)...)
				if r.code != step.want.code {
					t.Fatalf("%s: exit %d, want %d\n%s%s", step.name, r.code, step.want.code, r.stdout, r.stderr)
				}
				if r.code != exitOK {
					if r.stdout != "" || !strings.Contains(r.stderr, step.want.stderr) {
						t.Fatalf("%s: stdout %q, stderr %q; want nothing and %q", step.name, r.stdout, r.stderr, step.want.stderr)
					}
					continue
				}
				m := decode(t, r)
				if m["version"] != step.want.version || m["existed"] != step.want.existed || m["stream"] != "order-1" || m["position"] == "" || m["id"] == "" {
					t.Fatalf("%s: %v, want version %v, existed %v", step.name, m, step.want.version, step.want.existed)
				}
				if !step.want.existed {
					written++
				}
			}
			st, err := open.Existing(context.Background(), s.url, varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var got []varve.RecordedEvent
			for e, err := range st.ReadStream(context.Background(), "order-1") {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, e)
			}
			if len(got) != written {
				t.Fatalf("the stream has %d events, want %d", len(got), written)
			}
			i := 0
			for _, step := range steps {
				if step.want.code != exitOK || step.want.existed {
					continue
				}
				e := got[i]
				i++
				if e.Type != step.args[1] || !bytes.Equal(e.Data, step.data) {
					t.Errorf("%s: stored %s %q, want %s %q", step.name, e.Type, e.Data, step.args[1], step.data)
				}
			}
			if string(got[3].Metadata) != `{"by":"cli"}` || got[6].ID.String() != id {
				t.Errorf("metadata %q, id %s", got[3].Metadata, got[6].ID)
			}
		})
	}
}

// TestAppendMemoryAndRefusals: append on the memory store (which a run
// starts empty), the text output, and the streams it refuses before it
// opens anything.
func TestAppendMemoryAndRefusals(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		output string // a part of stdout (code 0) or stderr
	}{
		{[]string{"append", "s-1", "--type", "E", "--data", "{}", "--expected", "no-stream"}, exitOK, "appended E to s-1: version 1, position "},
		{[]string{"append", "s-1", "--type", "E", "--data", "{}", "--expected", "exists"}, exitFailed, "actual 0"},
		{[]string{"append", "s-1", "--type", "E", "--data", "{}", "--expected", "2"}, exitFailed, "wrong expected version"},
		{[]string{"append", "$parked-x", "--type", "E", "--data", "{}"}, exitUsage, "system streams"},
		{[]string{"append", "$all", "--type", "E", "--data", "{}"}, exitUsage, "global log"},
		{[]string{"append", "s-1", "--type", "E\x1b[2J", "--data", `{"a":"\u001b"}`}, exitOK, `appended E\x1b[2J to s-1`},
		{[]string{"append", "s-1"}, exitUsage, "--type"},
		{[]string{"append", "--type", "E"}, exitUsage, "accepts 1 arg"},
	} {
		r := runIn(t, append(tc.args, "--store", "memory:")...)
		out := r.stderr
		if tc.code == exitOK {
			out = r.stdout
		}
		if r.code != tc.code || !strings.Contains(out, tc.output) {
			t.Errorf("%v: exit %d, output %q; want %d and %q\n%s", tc.args, r.code, out, tc.code, tc.output, r.stderr)
		}
	}
}
