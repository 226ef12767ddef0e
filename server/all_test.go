package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/server"
)

// TestAllSystemStreams: $all pages and the live tail leave system streams
// out unless asked (system=true), as the CLI does; a page says where the
// next one starts and whether it reached the end.
func TestAllSystemStreams(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	ctx := t.Context()
	if _, err := store.System().Append(ctx, "$audit", varve.Any, varve.NewEvent("Audited", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"order-1", "order-2"} {
		if _, err := store.Append(ctx, s, varve.Any, varve.NewEvent("Placed", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	a := serve(t, store, server.Config{})
	streams := func(body map[string]any) []string {
		var out []string
		for _, e := range body["events"].([]any) {
			out = append(out, e.(map[string]any)["stream"].(string))
		}
		return out
	}
	for _, tc := range []struct {
		query string
		want  string
		next  string
		end   bool
	}{
		{"", "order-1 order-2", "3", true},
		{"?system=true", "$audit order-1 order-2", "3", true},
		{"?limit=2", "order-1", "2", false},
		{"?limit=2&system=true", "$audit order-1", "2", false},
		{"?after=2", "order-2", "3", true},
	} {
		r := a.want(a.do("GET", "/api/v1/all"+tc.query, nil), 200, "$all"+tc.query)
		if got := strings.Join(streams(r.body), " "); got != tc.want || r.body["next"] != tc.next || r.body["end"] != tc.end || r.body["more"] != !tc.end {
			t.Errorf("$all%s: events of %q next %v end %v more %v, want %q next %s end %v", tc.query, got, r.body["next"], r.body["end"], r.body["more"], tc.want, tc.next, tc.end)
		}
	}
	a.want(a.do("GET", "/api/v1/all?system=maybe", nil), 400, "a bad system")

	for _, tc := range []struct{ query, want string }{
		{"?after=0", "order-1 order-2"},
		{"?after=0&system=true", "$audit order-1 order-2"},
	} {
		if got := strings.Join(tailStreams(t, a, tc.query, 2+strings.Count(tc.query, "system")), " "); got != tc.want {
			t.Errorf("tail%s: events of %q, want %q", tc.query, got, tc.want)
		}
	}
}

// tailStreams follows the live tail with query until it has n events and
// returns their streams.
func tailStreams(t *testing.T, a *api, query string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", a.url+"/api/v1/all/tail"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("tail%s: status %d", query, res.StatusCode)
	}
	var out []string
	sc := bufio.NewScanner(res.Body)
	event := ""
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "event":
			var e struct{ Stream string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Stream)
		}
	}
	return out
}

// TestAppendRetryKeepsFirst: the contract of a re-sent event id with
// other data (documented in the package and in the OpenAPI document): 201
// with the first append's result, and the first payload stays.
func TestAppendRetryKeepsFirst(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{Writes: true})
	id := varve.NewEventID().String()
	send := func(data string) response {
		return a.do("POST", "/api/v1/streams/order-9/events", map[string]any{"expected_version": "no-stream",
			"events": []any{map[string]any{"id": id, "type": "Placed", "data": json.RawMessage(data)}}})
	}
	first := a.want(send(`{"total":1}`), 201, "the first append")
	again := a.want(send(`{"total":2}`), 201, "the retry with other data")
	if string(first.raw) != string(again.raw) {
		t.Fatalf("the retry answered %s, the first append %s", again.raw, first.raw)
	}
	r := a.want(a.do("GET", "/api/v1/streams/order-9/events", nil), 200, "the stream")
	evs := r.body["events"].([]any)
	if len(evs) != 1 || evs[0].(map[string]any)["data"].(map[string]any)["total"] != 1.0 {
		t.Fatalf("the stream holds %s, want the first payload alone", r.raw)
	}
}

// TestProjectionsAPI: the projections endpoints answer what package
// projection records, refuse unknown projections and versions, and
// record the requests they are given.
func TestProjectionsAPI(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	ctx := t.Context()
	for _, cp := range []string{projection.CheckpointName("totals", 1), projection.CheckpointName("totals", 1) + "-origin"} {
		if err := store.Checkpoints().Save(ctx, cp, varve.Start); err != nil {
			t.Fatal(err)
		}
	}
	a := serve(t, store, server.Config{Writes: true})
	list := a.want(a.do("GET", "/api/v1/projections", nil), 200, "the projections")
	if ps := list.body["projections"].([]any); len(ps) != 1 || ps[0].(map[string]any)["name"] != "totals" {
		t.Fatalf("projections: %s", list.raw)
	}
	a.want(a.do("GET", "/api/v1/projections/nope", nil), 404, "an unknown projection")
	a.want(a.do("POST", "/api/v1/projections/totals/rebuild", map[string]any{"version": 7}), 400, "a rebuild of an unknown version")
	r := a.want(a.do("POST", "/api/v1/projections/totals/rebuild", map[string]any{"version": 1}), 200, "a rebuild")
	if r.body["requested"] != "rebuild" || r.body["version"] != 1.0 {
		t.Fatalf("rebuild: %s", r.raw)
	}
	if c, err := projection.ReadControl(ctx, store, "totals"); err != nil || c.Rebuilds[1] == 0 {
		t.Fatalf("control after the rebuild: %+v %v", c, err)
	}
	one := a.want(a.do("GET", "/api/v1/projections/totals", nil), 200, "one projection")
	if v := one.body["versions"].([]any)[0].(map[string]any); v["rebuild_pending"] != true {
		t.Fatalf("the version after the request: %s", one.raw)
	}
	subs := a.want(a.do("GET", "/api/v1/subscriptions", nil), 200, "the consumers")
	if strings.Contains(string(subs.raw), "-origin") || !strings.Contains(string(subs.raw), "projection-totals-v1") {
		t.Fatalf("the consumers list the projection's bookkeeping or lack its checkpoint: %s", subs.raw)
	}
	ro := serve(t, store, server.Config{})
	ro.want(ro.do("POST", "/api/v1/projections/totals/pause", map[string]any{}), 403, "a pause with writes disabled")
}

// TestAllFiltered: $all pages and the tail take the library's filter
// (categories, types, stream prefixes); a bad filter is a 400.
func TestAllFiltered(t *testing.T) {
	store := teststore.Kinds[1].Open(t, varve.Config{})
	ctx := t.Context()
	for _, e := range []struct{ stream, typ string }{{"order-1", "Placed"}, {"cart-1", "Added"}, {"order-2", "Paid"}, {"order-22", "Placed"}} {
		if _, err := store.Append(ctx, e.stream, varve.Any, varve.NewEvent(e.typ, []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	a := serve(t, store, server.Config{})
	for _, tc := range []struct{ query, want string }{
		{"?category=order", "order-1 order-2 order-22"},
		{"?type=Placed", "order-1 order-22"},
		{"?stream_prefix=order-2", "order-2 order-22"},
		{"?category=order,cart&type=Added,Paid", "cart-1 order-2"},
		{"?category=order&limit=1&after=1", "order-2"},
	} {
		r := a.want(a.do("GET", "/api/v1/all"+tc.query, nil), 200, "$all"+tc.query)
		var got []string
		for _, e := range r.body["events"].([]any) {
			got = append(got, e.(map[string]any)["stream"].(string))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("$all%s: %q, want %q", tc.query, got, tc.want)
		}
	}
	a.want(a.do("GET", "/api/v1/all?category="+strings.Repeat("x,", 100)+"x", nil), 400, "a filter over its limits")
	if got := strings.Join(tailStreams(t, a, "?after=0&type=Paid,Added", 2), " "); got != "cart-1 order-2" {
		t.Errorf("a filtered tail: %q", got)
	}
}
