package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/server"
	"github.com/varve-go/varve/subscription"
)

// TestAPI drives every endpoint against every backend: reads, appends with
// expected versions and idempotent retries, lists, $all and its live tail,
// consumers with parked events, and bad input, which must get a 4xx with a
// JSON error that names the problem.
func TestAPI(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		sink := &recordingSink{}
		a := serve(t, store, server.Config{Writes: true, Name: "test " + k.Name,
			Replay: func(sub string) delivery.Sink {
				if sub == "hooks" {
					return sink
				}
				return nil
			}})
		t.Run("streams", func(t *testing.T) { testStreams(t, a, store) })
		t.Run("all", func(t *testing.T) { testAll(t, a, store) })
		t.Run("subscriptions", func(t *testing.T) { testSubscriptions(t, a, store, sink) })
		t.Run("bad input", func(t *testing.T) { testBadInput(t, a) })
		if strings.Contains(a.log.String()+a.seen.String(), token) {
			t.Fatal("the token appears in a response or a log line")
		}
	})
}

func testStreams(t *testing.T, a *api, store *varve.Store) {
	a.t = t
	id := "order/1 é" // a slash and a space travel escaped in the path
	path := "/api/v1/streams/" + url.PathEscape(id)
	a.want(a.do("GET", path, nil), 404, "info of a stream not yet written")

	e1, e2 := uuid.New(), uuid.New()
	body := map[string]any{"expected_version": "no-stream", "events": []any{
		map[string]any{"id": e1, "type": "OrderPlaced", "data": map[string]any{"sku": "A-1", "qty": 2}, "metadata": map[string]any{"by": "test"}},
		map[string]any{"id": e2, "type": "Blob", "data_base64": base64.StdEncoding.EncodeToString([]byte{0xff, 0, 1})},
	}}
	first := a.want(a.do("POST", path+"/events", body), 201, "append")
	if first.body["first_version"] != 1.0 || first.body["last_version"] != 2.0 {
		t.Fatalf("append: %s", first.raw)
	}
	// The same events again: an idempotent retry gets the same answer.
	retry := a.want(a.do("POST", path+"/events", body), 201, "retry of the append")
	if retry.body["position"] != first.body["position"] || retry.body["last_version"] != 2.0 {
		t.Fatalf("retry answered %s, the append %s", retry.raw, first.raw)
	}
	conflict := a.want(a.do("POST", path+"/events", map[string]any{"expected_version": 1, "events": []any{map[string]any{"type": "Late"}}}), 409, "stale version")
	if conflict.errCode() != "wrong_expected_version" || conflict.body["error"].(map[string]any)["actual"] != 2.0 {
		t.Fatalf("conflict: %s", conflict.raw)
	}
	dup := a.want(a.do("POST", path+"/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"id": uuid.New(), "type": "X"}, map[string]any{"id": e2, "type": "X"}}}), 409, "a stored id in another append")
	if dup.errCode() != "duplicate_event" {
		t.Fatalf("duplicate: %s", dup.raw)
	}
	// Ids the server made come back, so that a client can retry with them.
	third := a.want(a.do("POST", path+"/events", map[string]any{"expected_version": "2", "events": []any{map[string]any{"type": "OrderPaid", "data": 40}}}), 201, "append at an exact version given as a string")
	ids := third.body["ids"].([]any)
	if len(ids) != 1 || ids[0] == "" {
		t.Fatalf("append without ids: %s", third.raw)
	}

	info := a.want(a.do("GET", path, nil), 200, "info")
	if info.body["stream"] != id || info.body["version"] != 3.0 || info.body["deleted"] != false {
		t.Fatalf("info: %s", info.raw)
	}
	fwd := a.want(a.do("GET", path+"/events?limit=2", nil), 200, "read forward")
	evs := fwd.body["events"].([]any)
	if len(evs) != 2 || fwd.body["next"] != 3.0 {
		t.Fatalf("forward page: %s", fwd.raw)
	}
	ev0 := evs[0].(map[string]any)
	if ev0["type"] != "OrderPlaced" || ev0["data"].(map[string]any)["sku"] != "A-1" || ev0["metadata"].(map[string]any)["by"] != "test" || ev0["id"] != e1.String() {
		t.Fatalf("first event: %v", ev0)
	}
	if b, _ := base64.StdEncoding.DecodeString(evs[1].(map[string]any)["data_base64"].(string)); string(b) != "\xff\x00\x01" {
		t.Fatalf("binary data: %v", evs[1])
	}
	rest := a.want(a.do("GET", path+"/events?limit=2&from=3", nil), 200, "read the next page")
	if evs := rest.body["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["data"] != 40.0 || rest.body["next"] != nil {
		t.Fatalf("second page: %s", rest.raw)
	}
	back := a.want(a.do("GET", path+"/events?direction=backward&limit=2", nil), 200, "read backward")
	if evs := back.body["events"].([]any); len(evs) != 2 || evs[0].(map[string]any)["version"] != 3.0 || back.body["next"] != 1.0 {
		t.Fatalf("backward page: %s", back.raw)
	}

	// Lists by prefix, paged, in byte order.
	pfx := fmt.Sprintf("list-%d-", time.Now().UnixNano())
	for _, s := range []string{"b", "a", "c/d"} {
		a.want(a.do("POST", "/api/v1/streams/"+url.PathEscape(pfx+s)+"/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": "T"}}}), 201, "append "+s)
	}
	var got []string
	q := "/api/v1/streams?limit=2&prefix=" + url.QueryEscape(pfx)
	for page := q; ; {
		r := a.want(a.do("GET", page, nil), 200, "list")
		for _, s := range r.body["streams"].([]any) {
			got = append(got, s.(map[string]any)["stream"].(string))
		}
		next, _ := r.body["next"].(string)
		if next == "" {
			break
		}
		page = q + "&after=" + url.QueryEscape(next)
	}
	if want := []string{pfx + "a", pfx + "b", pfx + "c/d"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	// A tombstoned stream is gone for good: 410; it is listed as such.
	if err := store.Tombstone(t.Context(), pfx+"a", varve.Any); err != nil {
		t.Fatal(err)
	}
	a.want(a.do("GET", "/api/v1/streams/"+url.PathEscape(pfx+"a")+"/events", nil), 410, "read a tombstoned stream")
	a.want(a.do("POST", "/api/v1/streams/"+url.PathEscape(pfx+"a")+"/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": "T"}}}), 410, "append to a tombstoned stream")
	r := a.want(a.do("GET", "/api/v1/streams?prefix="+url.QueryEscape(pfx+"a"), nil), 200, "list a tombstoned stream")
	if s := r.body["streams"].([]any); len(s) != 1 || s[0].(map[string]any)["tombstoned"] != true {
		t.Fatalf("tombstoned stream listed as %s", r.raw)
	}
}

func testAll(t *testing.T, a *api, store *varve.Store) {
	a.t = t
	ctx := t.Context()
	start, err := store.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream := fmt.Sprintf("all-%d", time.Now().UnixNano())
	events, stop, res := a.tail(ctx, "?after="+url.QueryEscape(start.String()))
	defer stop()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("tail: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	next(t, events, "start", 30*time.Second)
	var positions []string
	for i := range 3 {
		r := a.want(a.do("POST", "/api/v1/streams/"+stream+"/events", map[string]any{"expected_version": i, "events": []any{map[string]any{"type": "Tick", "data": i}}}), 201, "append")
		positions = append(positions, r.body["position"].(string))
	}
	// Other tests write to the same store: keep this stream's events.
	var seen []string
	for len(seen) < 3 {
		ev := next(t, events, "event", 30*time.Second)
		var e map[string]any
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatal(err)
		}
		if e["stream"] == stream {
			if ev.id != e["position"] {
				t.Fatalf("event id %q, position %v", ev.id, e["position"])
			}
			seen = append(seen, ev.id)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(positions) {
		t.Fatalf("tail saw %v, appends were at %v", seen, positions)
	}
	// A reconnect with Last-Event-ID resumes after that event.
	again, stop2, _ := a.tail(ctx, "?after=start", "Last-Event-ID", positions[0])
	defer stop2()
	var resumed []string
	for len(resumed) < 2 {
		ev := next(t, again, "event", 30*time.Second)
		if strings.Contains(ev.data, stream) {
			resumed = append(resumed, ev.id)
		}
	}
	if fmt.Sprint(resumed) != fmt.Sprint(positions[1:]) {
		t.Fatalf("resumed at %v, want %v", resumed, positions[1:])
	}
	// A page of $all after a position.
	r := a.want(a.do("GET", "/api/v1/all?limit=1000&after="+url.QueryEscape(positions[0]), nil), 200, "read $all")
	found := 0
	for _, e := range r.body["events"].([]any) {
		if e.(map[string]any)["stream"] == stream {
			found++
		}
	}
	if found != 2 || r.body["through"] == positions[0] {
		t.Fatalf("$all after %s holds %d events of the stream: %s", positions[0], found, r.raw)
	}
	end := a.want(a.do("GET", "/api/v1/all?after=end", nil), 200, "read $all after its end")
	if n := len(end.body["events"].([]any)); n > 10 {
		t.Fatalf("$all after its end returned %d events", n)
	}
}

// recordingSink is a replay sink that keeps what it got.
type recordingSink struct {
	mu  sync.Mutex
	got []delivery.Delivery
}

func (s *recordingSink) Deliver(_ context.Context, d delivery.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, d)
	return nil
}

func (s *recordingSink) deliveries() []delivery.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery.Delivery(nil), s.got...)
}

// park appends events to stream and parks them for sub, as a dispatcher
// whose sink refused them would.
func park(t testing.TB, store *varve.Store, sub, stream string, n int) []delivery.ParkedEvent {
	t.Helper()
	ctx := context.Background()
	evs := make([]varve.Event, n)
	for i := range evs {
		evs[i] = varve.NewEvent("Poison", fmt.Appendf(nil, `{"n":%d}`, i))
	}
	if _, err := store.Append(ctx, stream, varve.Any, evs...); err != nil {
		t.Fatal(err)
	}
	var parked []delivery.ParkedEvent
	for e, err := range store.ReadStream(ctx, stream) {
		if err != nil {
			t.Fatal(err)
		}
		parked = append(parked, delivery.ParkedEvent{Subscription: sub, Stream: e.Stream, Version: e.Version, Position: e.Position,
			EventID: e.ID, Type: e.Type, Attempts: 3, Reason: delivery.ReasonRejected, Error: "sink said 400", ParkedAt: time.Now().UTC()})
	}
	if _, err := delivery.NewParked(store, sub).Park(ctx, parked...); err != nil {
		t.Fatal(err)
	}
	return parked
}

func testSubscriptions(t *testing.T, a *api, store *varve.Store, sink *recordingSink) {
	a.t = t
	ctx := t.Context()
	parked := park(t, store, "hooks", fmt.Sprintf("poison-%d", time.Now().UnixNano()), 3)
	cps := store.Checkpoints()
	if err := cps.Save(ctx, "hooks", varve.Start); err != nil {
		t.Fatal(err)
	}
	if err := cps.Save(ctx, "projector", parked[2].Position); err != nil {
		t.Fatal(err)
	}
	list := a.want(a.do("GET", "/api/v1/subscriptions", nil), 200, "list subscriptions")
	byName := map[string]map[string]any{}
	for _, s := range list.body["subscriptions"].([]any) {
		byName[s.(map[string]any)["name"].(string)] = s.(map[string]any)
	}
	hooks, proj := byName["hooks"], byName["projector"]
	if hooks == nil || proj == nil {
		t.Fatalf("subscriptions: %s", list.raw)
	}
	if hooks["parked"] != 3.0 || hooks["caught_up"] != false || hooks["lag"].(float64) < 3 || hooks["checkpoint"] != "0" {
		t.Fatalf("hooks: %v", hooks)
	}
	if proj["parked"] != 0.0 || proj["checkpoint"] != parked[2].Position.String() {
		t.Fatalf("projector: %v", proj)
	}
	one := a.want(a.do("GET", "/api/v1/subscriptions/hooks", nil), 200, "one subscription")
	if n := len(one.body["parked_events"].([]any)); n != 3 {
		t.Fatalf("parked events: %s", one.raw)
	}
	a.want(a.do("GET", "/api/v1/subscriptions/nobody", nil), 404, "unknown subscription")

	// Replay the first, skip the second; the third stays.
	rep := a.want(a.do("POST", "/api/v1/subscriptions/hooks/parked/replay", map[string]any{"positions": []string{parked[0].Position.String()}}), 200, "replay")
	if n := len(rep.body["replayed"].([]any)); n != 1 {
		t.Fatalf("replay: %s", rep.raw)
	}
	if got := sink.deliveries(); len(got) != 1 || got[0].Event.ID != parked[0].EventID || got[0].Key != delivery.Key("hooks", parked[0].Position) {
		t.Fatalf("the sink got %+v", got)
	}
	a.want(a.do("POST", "/api/v1/subscriptions/hooks/parked/skip", map[string]any{"positions": []string{parked[1].Position.String()}}), 200, "skip")
	left, err := delivery.NewParked(store, "hooks").List(ctx)
	if err != nil || len(left) != 1 || left[0].Position != parked[2].Position {
		t.Fatalf("left parked: %+v %v", left, err)
	}
	// Without a sink for it, a subscription's replay is refused clearly.
	park(t, store, "other", fmt.Sprintf("poison2-%d", time.Now().UnixNano()), 1)
	r := a.want(a.do("POST", "/api/v1/subscriptions/other/parked/replay", map[string]any{"all": true}), 501, "replay without a sink")
	if r.errCode() != "no_replay_sink" {
		t.Fatalf("replay without a sink: %s", r.raw)
	}
	// A projection's parked events go back through its runner: the
	// request is recorded in the projection's control stream.
	pp := park(t, store, "projection-rp-v1", fmt.Sprintf("poison3-%d", time.Now().UnixNano()), 2)
	if one := a.want(a.do("GET", "/api/v1/subscriptions/projection-rp-v1", nil), 200, "a projection's parked events"); one.body["replay_by_runner"] != true {
		t.Fatalf("a projection's version: %s", one.raw)
	}
	r = a.want(a.do("POST", "/api/v1/subscriptions/projection-rp-v1/parked/replay", map[string]any{"positions": []string{pp[1].Position.String()}}), 202, "replay of a projection's")
	c, err := projection.ReadControl(ctx, store, "rp")
	if err != nil {
		t.Fatal(err)
	}
	if rp := c.Replays["projection-rp-v1"]; rp == nil || !rp.Pending || rp.All || len(rp.Positions) != 1 || rp.Positions[0] != pp[1].Position ||
		r.body["request"] != float64(rp.Request) {
		t.Fatalf("replay of a projection's: %s, control %+v", r.raw, rp)
	}

	// Reset: to the end, to the start, to a position; never past the end.
	end := a.want(a.do("POST", "/api/v1/subscriptions/projector/reset", map[string]any{"to": "end"}), 200, "reset to the end")
	last, err := store.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pos, _, _ := cps.Load(ctx, "projector"); last.Less(pos) || pos.Less(parked[2].Position) || end.body["from"] != parked[2].Position.String() {
		t.Fatalf("reset to the end: checkpoint %s, last %s: %s", pos, last, end.raw)
	}
	a.want(a.do("POST", "/api/v1/subscriptions/projector/reset", map[string]any{"to": parked[0].Position.String()}), 200, "reset to a position")
	if pos, _, _ := cps.Load(ctx, "projector"); pos != parked[0].Position {
		t.Fatalf("reset to %s: checkpoint %s", parked[0].Position, pos)
	}
	past := varve.Position{Commit: last.Commit, Seq: last.Seq + 1000}
	r = a.want(a.do("POST", "/api/v1/subscriptions/projector/reset", map[string]any{"to": past.String()}), 400, "reset past the end")
	if !strings.Contains(r.errMessage(), "after the end") {
		t.Fatalf("reset past the end: %s", r.raw)
	}
	a.want(a.do("POST", "/api/v1/subscriptions/nobody/reset", map[string]any{"to": "start"}), 404, "reset of an unknown subscription")
}

// testBadInput: every kind of bad request gets its 4xx and a JSON error
// whose message names the problem.
func testBadInput(t *testing.T, a *api) {
	a.t = t
	stream := "/api/v1/streams/bad-input"
	ev := []any{map[string]any{"type": "T"}}
	cases := []struct {
		name, method, path string
		body               any
		hdr                []string
		status             int
		mention            string
	}{
		{"no token", "GET", "/api/v1/info", nil, []string{"Authorization", ""}, 401, "token"},
		{"wrong token", "GET", "/api/v1/info", nil, []string{"Authorization", "Bearer not-the-token-at-all!"}, 401, "token"},
		{"basic auth", "GET", "/api/v1/info", nil, []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+token))}, 401, "token"},
		{"unknown endpoint", "GET", "/api/v1/nothing", nil, nil, 404, "/api/v1/nothing"},
		{"wrong method", "DELETE", stream + "/events", nil, nil, 405, "DELETE"},
		{"unknown parameter", "GET", "/api/v1/streams?prefx=a", nil, nil, 400, "prefx"},
		{"repeated parameter", "GET", "/api/v1/streams?limit=1&limit=2", nil, nil, 400, "limit"},
		{"limit zero", "GET", stream + "/events?limit=0", nil, nil, 400, "limit"},
		{"limit too big", "GET", "/api/v1/all?limit=100000", nil, nil, 400, "limit"},
		{"limit not a number", "GET", "/api/v1/streams?limit=ten", nil, nil, 400, "limit"},
		{"bad direction", "GET", stream + "/events?direction=sideways", nil, nil, 400, "direction"},
		{"bad from", "GET", stream + "/events?from=-1", nil, nil, 400, "from"},
		{"bad position", "GET", "/api/v1/all?after=x:y", nil, nil, 400, "after"},
		{"bad tail position", "GET", "/api/v1/all/tail?after=12:", nil, nil, 400, "after"},
		{"bad system flag", "GET", "/api/v1/streams?system=maybe", nil, nil, 400, "system"},
		{"prefix with NUL", "GET", "/api/v1/streams?prefix=%00", nil, nil, 400, "prefix"},
		{"stream id with NUL", "GET", "/api/v1/streams/a%00b", nil, nil, 400, "NUL"},
		{"stream id too long", "GET", "/api/v1/streams/" + strings.Repeat("x", 300), nil, nil, 400, "stream id"},
		{"stream not found", "GET", "/api/v1/streams/never-written/events", nil, nil, 404, "not found"},
		{"$all as a stream", "GET", "/api/v1/streams/$all", nil, nil, 400, "$all"},
		{"not JSON", "POST", stream + "/events", "{expected", nil, 400, "JSON"},
		{"no content type", "POST", stream + "/events", `{}`, []string{"Content-Type", ""}, 415, "JSON"},
		{"form content type", "POST", stream + "/events", `a=b`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "JSON"},
		{"empty body", "POST", stream + "/events", "", nil, 400, "empty"},
		{"array body", "POST", stream + "/events", "[]", nil, 400, "object"},
		{"two values", "POST", stream + "/events", `{"expected_version":"any","events":[{"type":"T"}]} {}`, nil, 400, "more than one"},
		{"unknown field", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": ev, "expected": 1}, nil, 400, "expected"},
		{"missing expected version", "POST", stream + "/events", map[string]any{"events": ev}, nil, 400, "expected_version"},
		{"bad expected version", "POST", stream + "/events", map[string]any{"expected_version": "latest", "events": ev}, nil, 400, "expected_version"},
		{"negative expected version", "POST", stream + "/events", map[string]any{"expected_version": -5, "events": ev}, nil, 400, "expected_version"},
		{"no events", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{}}, nil, 400, "events"},
		{"event without type", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"data": 1}}}, nil, 400, "events[0].type"},
		{"type not a string", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": 7}}}, nil, 400, "type"},
		{"bad event id", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": "T", "id": "not-a-uuid"}}}, nil, 400, "uuid"},
		{"nil event id", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": "T", "id": uuid.Nil}}}, nil, 400, "nil UUID"},
		{"data twice", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": "T", "data": 1, "data_base64": "AA=="}}}, nil, 400, "not both"},
		{"bad base64", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": "T", "data_base64": "!!"}}}, nil, 400, "base64"},
		{"repeated ids", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": "T", "id": "0190b4a5-0000-7000-8000-000000000001"}, map[string]any{"type": "T", "id": "0190b4a5-0000-7000-8000-000000000001"}}}, nil, 400, "repeats"},
		{"system stream", "POST", "/api/v1/streams/$parked-x/events", map[string]any{"expected_version": "any", "events": ev}, nil, 400, "system"},
		{"event too large", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": "T", "data": strings.Repeat("x", 2<<20)}}}, nil, 400, "limit"},
		{"body too large", "POST", stream + "/events", map[string]any{"expected_version": "any", "events": []any{map[string]any{"type": "T", "data": strings.Repeat("x", 9<<20)}}}, nil, 413, "limit"},
		{"skip without a selection", "POST", "/api/v1/subscriptions/hooks/parked/skip", map[string]any{}, nil, 400, "positions"},
		{"skip at the start", "POST", "/api/v1/subscriptions/hooks/parked/skip", map[string]any{"positions": []string{"0"}}, nil, 400, "positions[0]"},
		{"skip both", "POST", "/api/v1/subscriptions/hooks/parked/skip", map[string]any{"positions": []string{"5"}, "all": true}, nil, 400, "not both"},
		{"bad position in a body", "POST", "/api/v1/subscriptions/hooks/parked/skip", map[string]any{"positions": []string{"five"}}, nil, 400, "five"},
		{"reset without a target", "POST", "/api/v1/subscriptions/hooks/reset", map[string]any{}, nil, 400, "to"},
		{"reset to nonsense", "POST", "/api/v1/subscriptions/hooks/reset", map[string]any{"to": "yesterday"}, nil, 400, "yesterday"},
		{"subscription name with NUL", "GET", "/api/v1/subscriptions/a%00b", nil, nil, 400, "NUL"},
		{"report path", "GET", "/api/v1/reports/..%2Fsecret.html", nil, nil, 400, "report"},
		{"report not HTML", "GET", "/api/v1/reports/notes.txt", nil, nil, 400, "report"},
		{"missing report", "GET", "/api/v1/reports/none.html", nil, nil, 404, "none.html"},
	}
	for _, c := range cases {
		r := a.want(a.do(c.method, c.path, c.body, c.hdr...), c.status, c.name)
		if !strings.Contains(strings.ToLower(r.errMessage()), strings.ToLower(c.mention)) {
			t.Errorf("%s: the message %q does not mention %q", c.name, r.errMessage(), c.mention)
		}
	}
}

// TestWritesDisabled: without writes, every mutating endpoint is refused
// with 403 and nothing is written, while reads work.
func TestWritesDisabled(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	park(t, store, "hooks", "poison", 1)
	a := serve(t, store, server.Config{Replay: func(string) delivery.Sink { return &recordingSink{} }})
	for _, c := range []struct{ path, body string }{
		{"/api/v1/streams/s/events", `{"expected_version":"any","events":[{"type":"T"}]}`},
		{"/api/v1/subscriptions/hooks/parked/replay", `{"all":true}`},
		{"/api/v1/subscriptions/hooks/parked/skip", `{"all":true}`},
		{"/api/v1/subscriptions/hooks/reset", `{"to":"start"}`},
	} {
		r := a.want(a.do("POST", c.path, c.body), 403, c.path)
		if r.errCode() != "writes_disabled" {
			t.Fatalf("%s: %s", c.path, r.raw)
		}
		// The token is checked first: without it, 401.
		a.want(a.do("POST", c.path, c.body, "Authorization", ""), 401, c.path+" without the token")
	}
	if _, err := store.StreamInfo(t.Context(), "s"); !errors.Is(err, varve.ErrStreamNotFound) {
		t.Fatalf("a refused append wrote: %v", err)
	}
	if left, _ := delivery.NewParked(store, "hooks").List(t.Context()); len(left) != 1 {
		t.Fatalf("a refused skip resolved parked events: %v", left)
	}
	a.want(a.do("GET", "/api/v1/subscriptions/hooks", nil), 200, "a read")
	info := a.want(a.do("GET", "/api/v1/info", nil), 200, "info")
	if info.body["writes"] != false {
		t.Fatalf("info: %s", info.raw)
	}
}

// TestHealth: health and readiness need no token and say nothing more; a
// closed store is not ready.
func TestHealth(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{})
	for _, p := range []string{"/api/v1/health", "/api/v1/ready"} {
		r := a.want(a.do("GET", p, nil, "Authorization", ""), 200, p)
		if len(r.body) != 1 {
			t.Fatalf("%s says more than its status: %s", p, r.raw)
		}
	}
	store.Close()
	a.want(a.do("GET", "/api/v1/health", nil, "Authorization", ""), 200, "health of a server whose store is closed")
	r := a.want(a.do("GET", "/api/v1/ready", nil, "Authorization", ""), 503, "readiness of a closed store")
	if r.body["status"] != "unavailable" {
		t.Fatalf("ready: %s", r.raw)
	}
	a.want(a.do("GET", "/api/v1/info", nil), 503, "info of a closed store")
}

// TestPanicIsJSON: a panic in a handler is a 500 with a JSON error, no
// stack in the response; the stack goes to the log.
func TestPanicIsJSON(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	park(t, store, "hooks", "poison", 1)
	a := serve(t, store, server.Config{Writes: true, Replay: func(string) delivery.Sink { panic("the sink factory broke") }})
	r := a.want(a.do("POST", "/api/v1/subscriptions/hooks/parked/replay", `{"all":true}`), 500, "a panicking handler")
	if r.errCode() != "internal" || strings.Contains(string(r.raw), "sink factory") {
		t.Fatalf("panic response: %s", r.raw)
	}
	if !strings.Contains(a.log.String(), "the sink factory broke") {
		t.Fatalf("the panic is not in the log:\n%s", a.log.String())
	}
}

// TestConfig: the token is required and must be long enough; NoAuth
// serves without one.
func TestConfig(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	for _, c := range []struct {
		name string
		cfg  server.Config
		ok   bool
	}{
		{"no store", server.Config{Token: token}, false},
		{"no token", server.Config{Store: store}, false},
		{"short token", server.Config{Store: store, Token: "short"}, false},
		{"token with space", server.Config{Store: store, Token: "abc def ghi jkl mno"}, false},
		{"token and NoAuth", server.Config{Store: store, Token: token, NoAuth: true}, false},
		{"negative limit", server.Config{Store: store, Token: token, MaxBodyBytes: -1}, false},
		{"token", server.Config{Store: store, Token: token}, true},
		{"NoAuth", server.Config{Store: store, NoAuth: true}, true},
	} {
		s, err := server.New(c.cfg)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v", c.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "abc def") {
			t.Errorf("%s: the error shows the token: %v", c.name, err)
		}
		if s != nil {
			s.Close()
		}
	}
	a := serve(t, store, server.Config{NoAuth: true})
	a.want(a.do("GET", "/api/v1/info", nil, "Authorization", ""), 200, "NoAuth without a token")
}

// TestHeaders: API answers are uncacheable data with a restrictive policy;
// console files carry the console's policy.
func TestHeaders(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{})
	r := a.want(a.do("GET", "/api/v1/info", nil), 200, "info")
	for k, v := range map[string]string{"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'"} {
		if r.header.Get(k) != v {
			t.Errorf("info: %s is %q, want %q", k, r.header.Get(k), v)
		}
	}
	page := a.want(a.do("GET", "/", nil, "Authorization", ""), 200, "console")
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("console policy: %q", csp)
	}
	if !strings.Contains(string(page.raw), `src="assets/app.js"`) || strings.Contains(string(page.raw), "http") {
		t.Errorf("the console page loads something from elsewhere:\n%s", page.raw)
	}
	a.want(a.do("GET", "/assets/app.js", nil, "Authorization", ""), 200, "console script")
	a.want(a.do("GET", "/assets/missing.js", nil, "Authorization", ""), 404, "missing console file")
	a.want(a.do("GET", "/elsewhere", nil, "Authorization", ""), 404, "unknown page")
}

// TestStreamsNotSupported: a backend that cannot list its streams answers
// 501, naming the capability.
func TestStreamsNotSupported(t *testing.T) {
	store, err := varve.New(bareBackend{teststore.Kinds[0].Backend(t)}, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a := serve(t, store, server.Config{})
	r := a.want(a.do("GET", "/api/v1/streams", nil), 501, "list without the capability")
	if r.errCode() != "not_supported" {
		t.Fatalf("%s", r.raw)
	}
	a.want(a.do("GET", "/api/v1/subscriptions", nil), 200, "consumers without listing capabilities")
}

// bareBackend hides every optional capability of a backend.
type bareBackend struct{ varve.Backend }

// TestLagLimit: a lag beyond LagLimit is counted up to it and flagged.
func TestLagLimit(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	for i := range 5 {
		if _, err := store.Append(t.Context(), "s", varve.Exact(varve.Version(i)), varve.NewEvent("E", nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Checkpoints().Save(t.Context(), "slow", varve.Start); err != nil {
		t.Fatal(err)
	}
	if err := store.Checkpoints().Save(t.Context(), "near", varve.Position{Seq: 3}); err != nil {
		t.Fatal(err)
	}
	a := serve(t, store, server.Config{LagLimit: 3})
	r := a.want(a.do("GET", "/api/v1/subscriptions", nil), 200, "list")
	got := map[string]string{}
	for _, s := range r.body["subscriptions"].([]any) {
		m := s.(map[string]any)
		got[m["name"].(string)] = fmt.Sprintf("lag %v more %v caught up %v", m["lag"], m["lag_more"], m["caught_up"])
	}
	want := map[string]string{"slow": "lag 3 more true caught up false", "near": "lag 2 more false caught up false"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("consumers: %v, want %v", got, want)
	}
	r = a.want(a.do("GET", "/api/v1/subscriptions?prefix=ne", nil), 200, "list by prefix")
	if s := r.body["subscriptions"].([]any); len(s) != 1 || s[0].(map[string]any)["name"] != "near" {
		t.Fatalf("by prefix: %s", r.raw)
	}
}

// TestLagByFilter: a consumer's lag counts only the events it reads, by
// the filter its subscription recorded: a consumer of category order is
// not behind by a user's events (it was before: every event counted).
func TestLagByFilter(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	ctx := t.Context()
	for _, st := range []string{"order-1", "user-1", "user-2", "order-2", "user-3"} {
		if _, err := store.Append(ctx, st, varve.Any, varve.NewEvent("E", nil)); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range map[string]varve.Filter{"orders": {Categories: []string{"order"}}, "all": {}} {
		sub, err := subscription.Open(ctx, store, subscription.Config{Name: name, Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.SaveCheckpoint(ctx, varve.Start); err != nil {
			t.Fatal(err)
		}
	}
	// A checkpoint without a recorded filter counts every event but
	// system streams', as before.
	if err := store.Checkpoints().Save(ctx, "unknown", varve.Start); err != nil {
		t.Fatal(err)
	}
	a := serve(t, store, server.Config{})
	for name, want := range map[string]float64{"orders": 2, "all": 5, "unknown": 5} {
		r := a.want(a.do("GET", "/api/v1/subscriptions/"+name, nil), 200, "consumer "+name)
		if s := r.body["subscription"].(map[string]any); s["lag"] != want {
			t.Errorf("lag of %s: %v, want %v", name, s["lag"], want)
		}
	}
}
