package server_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// TestAllBackward: $all pages newest first, filtered, page after page down
// to the start, on every backend.
func TestAllBackward(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		ctx := t.Context()
		var want []string // stream/version, oldest first
		for i := range 7 {
			stream := []string{"order-1", "cart-1", "order-2"}[i%3]
			res, err := store.Append(ctx, stream, varve.Any, varve.NewEvent("E", []byte(`{}`)))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("%s/%d", stream, res.LastVersion))
		}
		if _, err := store.System().Append(ctx, "$audit", varve.Any, varve.NewEvent("Audited", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
		a := serve(t, store, server.Config{})
		read := func(query string) (got []string, next string, end bool) {
			t.Helper()
			r := a.want(a.do("GET", "/api/v1/all?"+query, nil), 200, "$all?"+query)
			for _, e := range r.body["events"].([]any) {
				m := e.(map[string]any)
				got = append(got, fmt.Sprintf("%s/%v", m["stream"], m["version"]))
			}
			next, _ = r.body["next"].(string)
			return got, next, r.body["end"].(bool)
		}
		// Page after page, newest first, down to the start.
		var got []string
		query := "direction=backward&limit=3"
		for range 10 {
			page, next, end := read(query)
			got = append(got, page...)
			if end {
				break
			}
			query = "direction=backward&limit=3&before=" + url.QueryEscape(next)
		}
		var newestFirst []string
		for i := len(want) - 1; i >= 0; i-- {
			newestFirst = append(newestFirst, want[i])
		}
		if strings.Join(got, " ") != strings.Join(newestFirst, " ") {
			t.Errorf("$all backward by pages of 3: %v, want %v", got, newestFirst)
		}
		if page, _, _ := read("direction=backward&limit=2&system=true"); len(page) != 2 || page[0] != "$audit/1" {
			t.Errorf("$all backward with system streams: %v, want $audit first", page)
		}
		if page, _, end := read("direction=backward&category=order"); !end || strings.Join(page, " ") != "order-1/3 order-2/2 order-1/2 order-2/1 order-1/1" {
			t.Errorf("$all backward of category order: %v end %v", page, end)
		}
		for _, bad := range []string{"direction=sideways", "direction=backward&after=1", "before=3", "direction=backward&before=0", "direction=backward&before=x"} {
			a.want(a.do("GET", "/api/v1/all?"+bad, nil), 400, "$all?"+bad)
		}
	})
}

// TestSearchEvents finds an event by its id and events by the correlation
// id of their metadata, reading $all backward within the scan it is given,
// and says where to go on; on every backend.
func TestSearchEvents(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		ctx := t.Context()
		meta := func(c string) []byte { return []byte(`{"correlation_id":"` + c + `","user":"u-1"}`) }
		var ids []uuid.UUID
		for i := range 12 {
			e := varve.NewEvent("E", []byte(fmt.Sprintf(`{"n":%d}`, i)))
			e.Metadata = meta([]string{"req-a", "req-b", "req-a-longer"}[i%3])
			if _, err := store.Append(ctx, fmt.Sprintf("order-%d", i%4), varve.Any, e); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.ID)
		}
		a := serve(t, store, server.Config{})
		search := func(query string) (streams []string, body map[string]any) {
			t.Helper()
			r := a.want(a.do("GET", "/api/v1/events?"+query, nil), 200, "search "+query)
			for _, e := range r.body["events"].([]any) {
				m := e.(map[string]any)
				streams = append(streams, fmt.Sprintf("%s/%v", m["stream"], m["version"]))
			}
			return streams, r.body
		}
		got, body := search("id=" + ids[5].String())
		if strings.Join(got, " ") != "order-1/2" || body["end"] != true || body["scanned"] != float64(12) {
			t.Errorf("search by id: %v %v", got, body)
		}
		// req-a is events 0, 3, 6, 9 (req-a-longer does not match it).
		got, body = search("correlation_id=req-a")
		if strings.Join(got, " ") != "order-1/3 order-2/2 order-3/1 order-0/1" || body["end"] != true {
			t.Errorf("search by correlation id: %v %v", got, body)
		}
		// A scan of 5 reads events 11 to 7 and finds 9; the next goes on
		// before the last event it read.
		got, body = search("correlation_id=req-a&scan=5")
		if strings.Join(got, " ") != "order-1/3" || body["end"] != false || body["scanned"] != float64(5) {
			t.Errorf("search with a scan of 5: %v %v", got, body)
		}
		got, body = search("correlation_id=req-a&before=" + url.QueryEscape(body["next"].(string)))
		if strings.Join(got, " ") != "order-2/2 order-3/1 order-0/1" || body["end"] != true || body["next"] != nil {
			t.Errorf("search on: %v %v", got, body)
		}
		// A limit stops at the match: the next search goes on after it.
		got, body = search("correlation_id=req-a&limit=1")
		if strings.Join(got, " ") != "order-1/3" || body["end"] != false || body["scanned"] != float64(3) {
			t.Errorf("search with a limit of 1: %v %v", got, body)
		}
		if got, _ = search("correlation_id=req-a&stream_prefix=order-0"); strings.Join(got, " ") != "order-0/1" {
			t.Errorf("search within a stream prefix: %v", got)
		}
		if got, body = search("id=" + uuid.NewString()); len(got) != 0 || body["end"] != true {
			t.Errorf("search for an unknown id: %v %v", got, body)
		}
		for _, bad := range []string{"", "id=x", "id=" + ids[0].String() + "&correlation_id=req-a", "correlation_id=" + strings.Repeat("x", 257),
			"id=" + ids[0].String() + "&scan=0", "id=" + ids[0].String() + "&before=start", "id=" + ids[0].String() + "&after=1"} {
			a.want(a.do("GET", "/api/v1/events?"+bad, nil), 400, "search "+bad)
		}
	})
}
