package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/server"
)

// The DCB community's test suite (libraries/benchmark in the dcb-events
// repository), ported: its three scenarios, with its fixtures, against the
// server's dcb.events interface over HTTP, with the shapes its default
// adapter checks. In CI each runs 8 writers for 1.5 s; with
// VARVE_DCB_SUITE=long, the suite's own parameters (20 writers, 10 s).

type dcbItem struct {
	Types []string `json:"types,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

type dcbQuery struct {
	Items []dcbItem `json:"items"`
}

// match is the specification's: any item, whose types hold the event's
// (any type when none) and whose tags the event carries all of.
func (q dcbQuery) match(e dcbEvent) bool {
	if len(q.Items) == 0 {
		return true
	}
	for _, it := range q.Items {
		if (len(it.Types) == 0 || slices.Contains(it.Types, e.Type)) && !slices.ContainsFunc(it.Tags, func(t string) bool { return !slices.Contains(e.Tags, t) }) {
			return true
		}
	}
	return false
}

type dcbEvent struct {
	Type     string   `json:"type"`
	Tags     []string `json:"tags"`
	Data     string   `json:"data"`
	Position *uint64  `json:"position,omitempty"`
}

// dcbClient is the suite's default adapter (http_default.js) in Go.
type dcbClient struct{ base string }

func (c dcbClient) do(req *http.Request) (*http.Response, []byte, error) {
	u, _ := url.Parse(c.base)
	if u.User != nil {
		pass, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pass)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}

func (c dcbClient) url(path string) string {
	u, _ := url.Parse(c.base + path)
	u.User = nil
	return u.String()
}

func (c dcbClient) read(q dcbQuery, options map[string]any) ([]dcbEvent, error) {
	qs, _ := json.Marshal(q)
	u := c.url("/read") + "?query=" + url.QueryEscape(string(qs))
	if options != nil {
		os, _ := json.Marshal(options)
		u += "&options=" + url.QueryEscape(string(os))
	}
	req, _ := http.NewRequest("GET", u, nil)
	res, body, err := c.do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("read: %s %s", res.Status, body)
	}
	// The adapter's check: an array of {type: string, tags: array,
	// position: number}; data a string, as the scenarios parse it.
	var raw []map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("read: not a JSON array: %v", err)
	}
	for _, e := range raw {
		_, typ := e["type"].(string)
		_, tags := e["tags"].([]any)
		_, pos := e["position"].(float64)
		_, data := e["data"].(string)
		if !typ || !tags || !pos || !data {
			return nil, fmt.Errorf("read: an event of the wrong shape: %v", e)
		}
	}
	var out []dcbEvent
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, err
	}
	// Positions are integers a JavaScript number holds exactly.
	for _, e := range out {
		if *e.Position > varve.MaxPositionNumber {
			return nil, fmt.Errorf("read: position %d over 2^53-1", *e.Position)
		}
	}
	return out, nil
}

func (c dcbClient) last(q dcbQuery) (uint64, error) {
	evs, err := c.read(q, map[string]any{"backwards": true, "limit": 1})
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	return *evs[0].Position, nil
}

func (c dcbClient) append(evs []dcbEvent, fail *dcbQuery, after uint64) (failed bool, err error) {
	body := map[string]any{"events": evs}
	if fail != nil {
		cond := map[string]any{"failIfEventsMatch": fail}
		if after > 0 {
			cond["after"] = after
		}
		body["condition"] = cond
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", c.url("/append"), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	res, out, err := c.do(req)
	if err != nil {
		return false, err
	}
	var answer map[string]any
	if res.StatusCode != 200 || json.Unmarshal(out, &answer) != nil {
		return false, fmt.Errorf("append: %s %s", res.Status, out)
	}
	_, dur := answer["durationInMicroseconds"].(float64)
	f, ok := answer["appendConditionFailed"].(bool)
	if !dur || !ok {
		return false, fmt.Errorf("append: an answer of the wrong shape: %s", out)
	}
	return f, nil
}

// dcbFixture is the suite's fixture.ts: queries and batches over a few
// event types and tags.
type dcbFixture struct {
	types, tags                         int
	items, typesPerItem, tagsPerItem, n [2]int
}

func between(r *rand.Rand, b [2]int) int { return b[0] + r.IntN(b[1]-b[0]+1) }

func some(r *rand.Rand, prefix string, of, n int) []string {
	all := make([]string, of)
	for i := range all {
		all[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:min(n, of)]
}

func (f dcbFixture) query(r *rand.Rand) dcbQuery {
	q := dcbQuery{Items: []dcbItem{}}
	for range between(r, f.items) {
		nt, ng := between(r, f.typesPerItem), between(r, f.tagsPerItem)
		if nt == 0 && ng == 0 {
			nt, ng = max(between(r, f.typesPerItem), 1), max(between(r, f.tagsPerItem), 1)
		}
		var it dcbItem
		if nt > 0 {
			it.Types = some(r, "eventType", f.types, nt)
		}
		if ng > 0 {
			it.Tags = some(r, "tag", f.tags, ng)
		}
		q.Items = append(q.Items, it)
	}
	return q
}

type batchHead struct {
	BatchIndex                int      `json:"batchIndex"`
	BatchSize                 int      `json:"batchSize"`
	Query                     dcbQuery `json:"query"`
	LastMatchingEventPosition uint64   `json:"lastMatchingEventPosition"`
}

func (f dcbFixture) events(r *rand.Rand, q dcbQuery, last uint64) []dcbEvent {
	n := between(r, f.n)
	out := make([]dcbEvent, n)
	for i := range out {
		var data []byte
		if i == 0 {
			data, _ = json.Marshal(batchHead{BatchSize: n, Query: q, LastMatchingEventPosition: last})
		} else {
			data, _ = json.Marshal(map[string]int{"batchIndex": i, "batchSize": n})
		}
		out[i] = dcbEvent{Type: some(r, "eventType", f.types, 1)[0], Tags: some(r, "tag", f.tags, between(r, f.tagsPerItem)), Data: string(data)}
	}
	return out
}

// dcbRun runs fn in writers goroutines until the scenario's time is up;
// it returns the first error.
func dcbRun(writers int, d time.Duration, fn func(w, iter int, r *rand.Rand) error) error {
	seed := uint64(time.Now().UnixNano())
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; time.Now().Before(deadline); i++ {
				if err := fn(w, i, r); err != nil {
					errs <- fmt.Errorf("writer %d (seed %d): %w", w, seed, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func TestDCBSuite(t *testing.T) {
	writers, d := 8, 1500*time.Millisecond
	if os.Getenv("VARVE_DCB_SUITE") == "long" {
		writers, d = 20, 10*time.Second
	}
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		a := serve(t, store, server.Config{Writes: true})
		u, _ := url.Parse(a.url)
		u.User = url.UserPassword("varve", token)
		c := dcbClient{base: u.String() + "/api/v1/dcb"}
		if c := store.Capabilities(); !c.Tags || !c.PositionNumbers {
			r := a.do("GET", "/api/v1/dcb/read", nil)
			if r.status != http.StatusNotImplemented || !strings.Contains(r.errMessage(), "positions") && !strings.Contains(r.errMessage(), "tags") {
				t.Fatalf("the DCB interface on %s: %d %s", k.Name, r.status, r.raw)
			}
			if k.Name != "nats" {
				t.Fatalf("the DCB interface is not served on %s", k.Name)
			}
			return
		}
		// Without credentials, or with another password: 401, as the rest
		// of the API; the token as a password opens the DCB interface only.
		if r := a.do("GET", "/api/v1/info", nil, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("varve:"+token))); r.status != http.StatusUnauthorized {
			t.Fatalf("the token as a Basic password outside the DCB interface: %d", r.status)
		}
		for _, who := range []*url.Userinfo{nil, url.UserPassword("varve", "not-the-token-at-all")} {
			req, _ := http.NewRequest("GET", a.url+"/api/v1/dcb/read", nil)
			if who != nil {
				pass, _ := who.Password()
				req.SetBasicAuth(who.Username(), pass)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a read with credentials %v: %s, want 401", who, res.Status)
			}
		}

		t.Run("consistency", func(t *testing.T) {
			f := dcbFixture{types: 10, tags: 10, items: [2]int{0, 3}, typesPerItem: [2]int{0, 4}, tagsPerItem: [2]int{0, 3}, n: [2]int{1, 2}}
			var appended, failed sync.Map
			err := dcbRun(writers, d, func(w, i int, r *rand.Rand) error {
				q := f.query(r)
				last, err := c.last(q)
				if err != nil {
					return err
				}
				fail, err := c.append(f.events(r, q, last), &q, last)
				(map[bool]*sync.Map{false: &appended, true: &failed})[fail].Store(fmt.Sprint(w, "/", i), true)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			all, err := c.read(dcbQuery{Items: []dcbItem{}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for i, e := range all {
				if i > 0 && *e.Position <= *all[i-1].Position {
					t.Fatalf("positions out of order: %d after %d", *e.Position, *all[i-1].Position)
				}
				var head batchHead
				if json.Unmarshal([]byte(e.Data), &head) != nil || head.BatchIndex != 0 {
					continue
				}
				var want uint64
				for _, before := range all[:i] {
					if head.Query.match(before) {
						want = *before.Position
					}
				}
				if head.LastMatchingEventPosition != want {
					t.Fatalf("the append at %d decided on the last match at %d, but the last match before it is at %d: the condition %+v was not enforced",
						*e.Position, head.LastMatchingEventPosition, want, head.Query)
				}
				// The server's query read agrees, for some.
				if checked%20 == 0 {
					matches, err := c.read(head.Query, nil)
					if err != nil {
						t.Fatal(err)
					}
					var got uint64
					for _, m := range matches {
						if *m.Position < *e.Position {
							got = *m.Position
						}
					}
					if got != want {
						t.Fatalf("the server's read of %+v gives the last match before %d at %d, want %d", head.Query, *e.Position, got, want)
					}
				}
				checked++
			}
			n := 0
			failed.Range(func(any, any) bool { n++; return true })
			t.Logf("%d appends checked of %d events; %d appends failed their condition", checked, len(all), n)
			if checked == 0 {
				t.Fatal("no append to check")
			}
		})

		t.Run("monotonic", func(t *testing.T) {
			f := dcbFixture{types: 5, tags: 5, items: [2]int{0, 3}, typesPerItem: [2]int{0, 4}, tagsPerItem: [2]int{0, 3}, n: [2]int{2, 5}}
			stop := make(chan struct{})
			reads := make(chan error, 1)
			go func() {
				var prev []uint64
				n := 0
				for {
					select {
					case <-stop:
						reads <- nil
						return
					default:
					}
					evs, err := c.read(dcbQuery{Items: []dcbItem{}}, nil)
					if err != nil {
						reads <- err
						return
					}
					cur := make([]uint64, len(evs))
					for i, e := range evs {
						cur[i] = *e.Position
						if i > 0 && cur[i] <= cur[i-1] {
							reads <- fmt.Errorf("read %d: position %d after %d", n, cur[i], cur[i-1])
							return
						}
					}
					// What a reader saw before is what it sees now, then more.
					if len(cur) < len(prev) || !slices.Equal(cur[:len(prev)], prev) {
						reads <- fmt.Errorf("read %d does not extend read %d: %d positions, then %d", n, n-1, len(prev), len(cur))
						return
					}
					prev, n = cur, n+1
				}
			}()
			err := dcbRun(max(writers*5/20, 2), d, func(_, _ int, r *rand.Rand) error {
				q := f.query(r)
				last, err := c.last(q)
				if err == nil {
					_, err = c.append(f.events(r, q, last), &q, last)
				}
				return err
			})
			close(stop)
			if rerr := <-reads; err == nil {
				err = rerr
			}
			if err != nil {
				t.Fatal(err)
			}
		})

		t.Run("parallel-writes", func(t *testing.T) {
			var mu sync.Mutex
			appends, failures := 0, 0
			err := dcbRun(writers, d, func(w, i int, _ *rand.Rand) error {
				tag := fmt.Sprintf("vu%d-iter%d", w, i)
				q := dcbQuery{Items: []dcbItem{{Tags: []string{tag}, Types: []string{"SomeEvent"}}}}
				fail, err := c.append([]dcbEvent{{Type: "SomeEvent", Tags: []string{tag}, Data: "{}"}}, &q, 0)
				mu.Lock()
				appends++
				if fail {
					failures++
				}
				mu.Unlock()
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d unrelated appends in parallel, %d failed", appends, failures)
			if failures > 0 || appends == 0 {
				t.Fatalf("the error rate of unrelated appends is %d of %d, want 0", failures, appends)
			}
		})
	})
}

// TestDCBPositions: on every store that serves the interface, from
// (inclusive) reads forward from a position and backward down to it,
// newest first, with a limit; a number between two events' (past the end
// of a multi-event append, on PostgreSQL) reads on from the later one;
// condition.after fails on a matching event after it only; a number over
// 2^53-1 is a bad request.
func TestDCBPositions(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		store := k.Open(t, varve.Config{})
		if c := store.Capabilities(); !c.Tags || !c.PositionNumbers {
			t.Skipf("%s does not serve the DCB interface (TestDCBSuite checks its 501)", k.Name)
		}
		a := serve(t, store, server.Config{Writes: true})
		u, _ := url.Parse(a.url)
		u.User = url.UserPassword("varve", token)
		c := dcbClient{base: u.String() + "/api/v1/dcb"}
		tag := fmt.Sprintf("pos-%d", time.Now().UnixNano())
		q := dcbQuery{Items: []dcbItem{{Tags: []string{tag}}}}
		n := 0
		for i := range 6 {
			evs := make([]dcbEvent, 1+i%3)
			for j := range evs {
				evs[j] = dcbEvent{Type: "E", Tags: []string{tag}, Data: fmt.Sprint(i, "/", j)}
			}
			// Another stream's event between the appends.
			other := []dcbEvent{{Type: "Other", Tags: []string{tag + "-other"}, Data: "x"}}
			for _, b := range [][]dcbEvent{evs, other} {
				if failed, err := c.append(b, nil, 0); err != nil || failed {
					t.Fatalf("append: %v %v", failed, err)
				}
			}
			n += len(evs)
		}
		all, err := c.read(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != n {
			t.Fatalf("%d events read, %d appended", len(all), n)
		}
		pos := make([]uint64, len(all))
		for i, e := range all {
			pos[i] = *e.Position
			if i > 0 && pos[i] <= pos[i-1] {
				t.Fatalf("positions %v not increasing", pos)
			}
		}
		data := func(evs []dcbEvent) []string {
			out := make([]string, len(evs))
			for i, e := range evs {
				out[i] = e.Data
			}
			return out
		}
		reversed := func(evs []dcbEvent) []string {
			out := data(evs)
			slices.Reverse(out)
			return out
		}
		want := func(what string, options map[string]any, w []string) {
			t.Helper()
			got, err := c.read(q, options)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !slices.Equal(data(got), w) {
				t.Fatalf("%s (%v): %v, want %v", what, options, data(got), w)
			}
		}
		for i := range all {
			want("forward from an event", map[string]any{"from": pos[i]}, data(all[i:]))
			want("backward from an event", map[string]any{"from": pos[i], "backwards": true}, reversed(all[:i+1]))
			want("two from an event", map[string]any{"from": pos[i], "limit": 2}, data(all[i:min(i+2, len(all))]))
			if i > 0 && pos[i]-pos[i-1] > 1 {
				for _, between := range []uint64{pos[i-1] + 1, pos[i] - 1} {
					want("forward from between two events", map[string]any{"from": between}, data(all[i:]))
					want("backward from between two events", map[string]any{"from": between, "backwards": true}, reversed(all[:i]))
				}
			}
			// A condition after this event fails while one of the query's
			// events is after it.
			failed, err := c.append([]dcbEvent{{Type: "Decided", Tags: []string{tag + "-decided"}, Data: "{}"}}, &q, pos[i])
			if err != nil || failed != (i < len(all)-1) {
				t.Fatalf("a condition after the event %d of %d: failed %v, %v", i+1, len(all), failed, err)
			}
		}
		for _, r := range []response{
			a.do("GET", "/api/v1/dcb/read?options="+url.QueryEscape(`{"from": 9007199254740993}`), nil),
			a.do("POST", "/api/v1/dcb/append", map[string]any{"events": []dcbEvent{{Type: "E", Data: "{}"}},
				"condition": map[string]any{"failIfEventsMatch": q, "after": uint64(1) << 60}}),
		} {
			if r.status != http.StatusBadRequest || !strings.Contains(r.errMessage(), "over") {
				t.Fatalf("a position over 2^53-1: %d %s", r.status, r.raw)
			}
		}
	})
}

// sharedNumbers numbers positions as memory does, except that the events
// at the positions of removed share the number of the position before
// them, as PostgreSQL numbers an event removed since a page was read.
type sharedNumbers struct {
	varve.Backend
	removed map[uint64]bool
}

func (b sharedNumbers) Unwrap() varve.Backend { return b.Backend }

func (b sharedNumbers) NumberPositions(_ context.Context, ps []varve.Position) ([]uint64, error) {
	out := make([]uint64, len(ps))
	for i, p := range ps {
		out[i] = p.Seq
		if b.removed[p.Seq] {
			out[i]--
		}
	}
	return out, nil
}

func (b sharedNumbers) PositionOfNumber(_ context.Context, n uint64) (varve.Position, error) {
	return varve.Position{Seq: n}, nil
}

// TestDCBRemovedInRace: an event removed between the read of its page and
// its numbering, which shares the number of the event before it, is left
// out, forward and backward, so that the positions go strictly one way and
// the event before it is answered.
func TestDCBRemovedInRace(t *testing.T) {
	store, err := varve.New(sharedNumbers{memory.New(), map[uint64]bool{3: true}}, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for i := range 5 {
		if _, err := store.Append(context.Background(), "s", varve.Any, varve.Event{Type: "E", Data: []byte(fmt.Sprint(i + 1))}); err != nil {
			t.Fatal(err)
		}
	}
	a := serve(t, store, server.Config{})
	u, _ := url.Parse(a.url)
	u.User = url.UserPassword("varve", token)
	c := dcbClient{base: u.String() + "/api/v1/dcb"}
	for _, tc := range []struct {
		options map[string]any
		want    string
	}{
		{nil, "[1@1 2@2 4@4 5@5]"},
		{map[string]any{"backwards": true}, "[5@5 4@4 2@2 1@1]"},
		{map[string]any{"from": 2}, "[2@2 4@4 5@5]"},
		{map[string]any{"backwards": true, "from": 3}, "[2@2 1@1]"},
	} {
		evs, err := c.read(dcbQuery{Items: []dcbItem{}}, tc.options)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, fmt.Sprintf("%s@%d", e.Data, *e.Position))
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("%v: %v, want %s", tc.options, got, tc.want)
		}
	}
}

// TestDCBBadQuery: a query the store refuses (an item with neither types
// nor tags) is a 400 before the answer begins, not an answer cut short.
func TestDCBBadQuery(t *testing.T) {
	store := teststore.Kinds[0].Open(t, varve.Config{})
	a := serve(t, store, server.Config{Writes: true})
	r := a.do("GET", "/api/v1/dcb/read?query="+url.QueryEscape(`{"items":[{}]}`), nil)
	if r.status != http.StatusBadRequest || !strings.Contains(r.errMessage(), "neither types nor tags") {
		t.Fatalf("a read with an empty query item: %d %s", r.status, r.raw)
	}
}
