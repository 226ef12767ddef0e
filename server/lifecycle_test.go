package server_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestStreamLifecycle drives truncate, delete and tombstone through the
// API on every backend: each answers the stream's info after the change,
// and reads and appends see the change; bad input, a stale expected
// version, a missing or tombstoned stream and a system stream get their
// 4xx with a JSON error, and leave the stream as it was.
func TestStreamLifecycle(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		a := serve(t, store, server.Config{Writes: true})
		sys := "$lifecycle-" + k.Name
		if _, err := store.System().Append(t.Context(), sys, varve.Any, varve.NewEvent("Kept", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
		appendTo := func(t *testing.T, stream, expected string, n int) response {
			t.Helper()
			evs := make([]any, n)
			for i := range evs {
				evs[i] = map[string]any{"type": "Noted", "data": map[string]any{"n": i + 1}}
			}
			return a.do("POST", "/api/v1/streams/"+url.PathEscape(stream)+"/events", map[string]any{"expected_version": expected, "events": evs})
		}
		versions := func(t *testing.T, stream string) []float64 {
			t.Helper()
			r := a.want(a.do("GET", "/api/v1/streams/"+url.PathEscape(stream)+"/events?direction=forward", nil), 200, "read "+stream)
			var vs []float64
			for _, e := range r.body["events"].([]any) {
				vs = append(vs, e.(map[string]any)["version"].(float64))
			}
			return vs
		}
		cases := []struct {
			name   string
			events int    // appended to the case's stream first
			prep   string // then: "delete" or "tombstone" it
			stream string // instead of the case's own
			method string
			path   string // after /api/v1/streams/{stream}
			body   any
			status int
			code   string // of an error, or "" for 200
			check  func(t *testing.T, stream string, r response)
		}{
			{name: "truncate", events: 5, method: "POST", path: "/truncate", body: map[string]any{"before": 3}, status: 200,
				check: func(t *testing.T, stream string, r response) {
					if r.body["stream"] != stream || r.body["version"] != 5.0 || r.body["deleted"] != false {
						t.Fatalf("after truncate: %s", r.raw)
					}
					if vs := versions(t, stream); fmt.Sprint(vs) != "[3 4 5]" {
						t.Fatalf("after truncate before 3 the stream holds versions %v", vs)
					}
					if r := a.want(appendTo(t, stream, "5", 1), 201, "append after truncate"); r.body["last_version"] != 6.0 {
						t.Fatalf("append after truncate: %s", r.raw)
					}
				}},
			{name: "truncate past the end", events: 2, method: "POST", path: "/truncate", body: map[string]any{"before": 10}, status: 200,
				check: func(t *testing.T, stream string, r response) {
					if r.body["version"] != 2.0 {
						t.Fatalf("after truncate: %s", r.raw)
					}
					if vs := versions(t, stream); len(vs) != 0 {
						t.Fatalf("after truncate past the end the stream holds versions %v", vs)
					}
				}},
			{name: "delete", events: 3, method: "DELETE", status: 200,
				check: func(t *testing.T, stream string, r response) {
					if r.body["deleted"] != true || r.body["tombstoned"] != false {
						t.Fatalf("after delete: %s", r.raw)
					}
					if g := a.want(a.do("GET", "/api/v1/streams/"+url.PathEscape(stream), nil), 200, "info after delete"); g.body["deleted"] != true {
						t.Fatalf("info after delete: %s", g.raw)
					}
					if r := a.want(appendTo(t, stream, "no-stream", 1), 201, "append afresh"); r.body["first_version"] != 1.0 {
						t.Fatalf("append after delete: %s", r.raw)
					}
					if vs := versions(t, stream); fmt.Sprint(vs) != "[1]" {
						t.Fatalf("after delete and append the stream holds versions %v", vs)
					}
				}},
			{name: "delete at its version", events: 2, method: "DELETE", path: "?expected_version=2", status: 200},
			{name: "delete if it exists", events: 2, method: "DELETE", path: "?expected_version=stream-exists&tombstone=false", status: 200},
			{name: "tombstone", events: 2, method: "DELETE", path: "?tombstone=true&expected_version=any", status: 200,
				check: func(t *testing.T, stream string, r response) {
					if r.body["deleted"] != true || r.body["tombstoned"] != true {
						t.Fatalf("after tombstone: %s", r.raw)
					}
					if r := a.want(appendTo(t, stream, "any", 1), 410, "append after tombstone"); r.errCode() != "stream_deleted" {
						t.Fatalf("append after tombstone: %s", r.raw)
					}
					a.want(appendTo(t, stream, "no-stream", 1), 410, "append afresh after tombstone")
				}},
			{name: "tombstone reserves a new id", method: "DELETE", path: "?tombstone=true&expected_version=no-stream", status: 200,
				check: func(t *testing.T, stream string, r response) {
					if r.body["tombstoned"] != true {
						t.Fatalf("after tombstone: %s", r.raw)
					}
					a.want(appendTo(t, stream, "no-stream", 1), 410, "append to a reserved id")
				}},
			{name: "delete at a stale version", events: 3, method: "DELETE", path: "?expected_version=2", status: 409, code: "wrong_expected_version"},
			{name: "tombstone at a stale version", events: 3, method: "DELETE", path: "?expected_version=no-stream&tombstone=true", status: 409, code: "wrong_expected_version"},
			{name: "delete of no stream", method: "DELETE", status: 404, code: "stream_not_found"},
			{name: "delete of a deleted stream", events: 1, prep: "delete", method: "DELETE", status: 404, code: "stream_not_found"},
			{name: "truncate of no stream", method: "POST", path: "/truncate", body: map[string]any{"before": 2}, status: 404, code: "stream_not_found"},
			{name: "delete of a tombstoned stream", events: 1, prep: "tombstone", method: "DELETE", status: 410, code: "stream_deleted"},
			{name: "tombstone of a tombstoned stream", events: 1, prep: "tombstone", method: "DELETE", path: "?tombstone=true", status: 410, code: "stream_deleted"},
			{name: "truncate of a tombstoned stream", events: 1, prep: "tombstone", method: "POST", path: "/truncate", body: map[string]any{"before": 2}, status: 410, code: "stream_deleted"},
			{name: "before zero", events: 2, method: "POST", path: "/truncate", body: map[string]any{"before": 0}, status: 400, code: "invalid_argument"},
			{name: "before negative", events: 2, method: "POST", path: "/truncate", body: map[string]any{"before": -1}, status: 400, code: "invalid_argument"},
			{name: "before not a number", events: 2, method: "POST", path: "/truncate", body: map[string]any{"before": "two"}, status: 400, code: "invalid_argument"},
			{name: "before a fraction", events: 2, method: "POST", path: "/truncate", body: map[string]any{"before": 1.5}, status: 400, code: "invalid_argument"},
			{name: "before missing", events: 2, method: "POST", path: "/truncate", body: map[string]any{}, status: 400, code: "invalid_argument"},
			{name: "unknown field", events: 2, method: "POST", path: "/truncate", body: map[string]any{"before": 2, "after": 1}, status: 400, code: "invalid_argument"},
			{name: "truncate without a body", events: 2, method: "POST", path: "/truncate", status: 415, code: "unsupported_media_type"},
			{name: "bad expected version", events: 2, method: "DELETE", path: "?expected_version=latest", status: 400, code: "invalid_argument"},
			{name: "empty expected version", events: 2, method: "DELETE", path: "?expected_version=", status: 400, code: "invalid_argument"},
			{name: "bad tombstone flag", events: 2, method: "DELETE", path: "?tombstone=maybe", status: 400, code: "invalid_argument"},
			{name: "unknown parameter of delete", events: 2, method: "DELETE", path: "?expected=1", status: 400, code: "invalid_argument"},
			{name: "unknown parameter of truncate", events: 2, method: "POST", path: "/truncate?force=true", body: map[string]any{"before": 2}, status: 400, code: "invalid_argument"},
			{name: "repeated parameter", events: 2, method: "DELETE", path: "?tombstone=true&tombstone=false", status: 400, code: "invalid_argument"},
			{name: "delete of a system stream", stream: sys, method: "DELETE", status: 403, code: "system_stream"},
			{name: "tombstone of a system stream", stream: sys, method: "DELETE", path: "?tombstone=true", status: 403, code: "system_stream"},
			{name: "truncate of a system stream", stream: sys, method: "POST", path: "/truncate", body: map[string]any{"before": 2}, status: 403, code: "system_stream"},
			{name: "delete of $all", stream: varve.AllStream, method: "DELETE", status: 400, code: "invalid_argument"},
			{name: "stream id with NUL", stream: "a\x00b", method: "DELETE", status: 400, code: "invalid_argument"},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				a.t = t
				stream := c.stream
				if stream == "" {
					stream = fmt.Sprintf("lifecycle-%d/%s", i, strings.ReplaceAll(c.name, " ", "-"))
				}
				if c.events > 0 {
					a.want(appendTo(t, stream, "no-stream", c.events), 201, "the case's events")
				}
				ctx := t.Context()
				switch c.prep {
				case "delete":
					if err := store.Delete(ctx, stream, varve.Any); err != nil {
						t.Fatal(err)
					}
				case "tombstone":
					if err := store.Tombstone(ctx, stream, varve.Any); err != nil {
						t.Fatal(err)
					}
				}
				before, beforeErr := store.StreamInfo(ctx, stream)
				r := a.want(a.do(c.method, "/api/v1/streams/"+url.PathEscape(stream)+c.path, c.body), c.status, c.name)
				if c.code != "" {
					if r.errCode() != c.code {
						t.Fatalf("error code %q, want %q: %s", r.errCode(), c.code, r.raw)
					}
					// A refused request changes nothing.
					after, afterErr := store.StreamInfo(ctx, stream)
					if fmt.Sprint(after, afterErr) != fmt.Sprint(before, beforeErr) {
						t.Fatalf("a refused request changed the stream: %+v (%v), was %+v (%v)", after, afterErr, before, beforeErr)
					}
					return
				}
				if r.body["stream"] != stream {
					t.Fatalf("answered %s", r.raw)
				}
				if c.check != nil {
					c.check(t, stream, r)
				}
			})
		}
		a.t = t
		if r := a.want(a.do("GET", "/api/v1/streams/"+url.PathEscape(sys)+"/events", nil), 200, "the system stream"); len(r.body["events"].([]any)) != 1 {
			t.Fatalf("the system stream after the refusals: %s", r.raw)
		}
	})
}

// TestStreamLifecycleReadOnly: without writes, truncate, delete and
// tombstone are refused with 403 and change nothing.
func TestStreamLifecycleReadOnly(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	if _, err := store.Append(t.Context(), "order-1", varve.NoStream, varve.NewEvent("Placed", []byte(`{}`)), varve.NewEvent("Paid", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	a := serve(t, store, server.Config{})
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/v1/streams/order-1/truncate", map[string]any{"before": 2}},
		{"DELETE", "/api/v1/streams/order-1", nil},
		{"DELETE", "/api/v1/streams/order-1?tombstone=true", nil},
	} {
		if r := a.want(a.do(c.method, c.path, c.body), 403, c.method+" "+c.path); r.errCode() != "writes_disabled" {
			t.Fatalf("%s %s: %s", c.method, c.path, r.raw)
		}
	}
	info, err := store.StreamInfo(t.Context(), "order-1")
	if err != nil || info.Version != 2 || info.Deleted {
		t.Fatalf("after the refusals: %+v %v", info, err)
	}
	if r := a.want(a.do("GET", "/api/v1/streams/order-1/events", nil), 200, "read"); len(r.body["events"].([]any)) != 2 {
		t.Fatalf("after the refusals the stream reads %s", r.raw)
	}
}
