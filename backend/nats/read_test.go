package nats

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// TestReadRequests counts the server requests of stream reads by a backend
// that another one writes to: on servers with batched direct gets, a read
// that the stream's last commit does not answer is one batch, also when
// the reader knows nothing of the stream, when the stream moved on since
// it last looked (appends, a truncation, a delete and a new incarnation).
// Every read is checked against the events written, on every server.
func TestReadRequests(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("rreqs"))
		w := m.open(t, cfg)
		r := m.attach(t, cfg)
		one := -1 // any number where reads get the head first
		if m.name == "embedded" {
			one = 1
		}
		// ids[v] is the id of the event at version v of the live
		// incarnation; floor is its first live version.
		ids := map[varve.Version]uuid.UUID{}
		var ver, floor varve.Version = 0, 1
		appendTo := func(be *Backend, n int) {
			t.Helper()
			evs := makeEvents(n, 10)
			res, err := be.Append(ctxT(t), varve.AppendRequest{Stream: "s", Expected: varve.Exact(ver), Events: evs})
			if err != nil {
				t.Fatalf("append %d events at %d: %v", n, ver, err)
			}
			for i := range evs {
				ids[ver+1+varve.Version(i)] = evs[i].ID
			}
			ver = res.LastVersion
		}
		read := func(what string, q varve.StreamQuery, lo, hi varve.Version, want int) {
			t.Helper()
			q.Stream = "s"
			before := r.Requests()
			got, err := r.ReadStream(ctxT(t), q, nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if n := r.Requests() - before; want >= 0 && n != uint64(want) {
				t.Errorf("%s: %d requests, want %d", what, n, want)
			}
			var vs []varve.Version
			for v := lo; v <= hi; v++ {
				vs = append(vs, v)
			}
			if q.Direction == varve.Backward {
				for i, j := 0, len(vs)-1; i < j; i, j = i+1, j-1 {
					vs[i], vs[j] = vs[j], vs[i]
				}
			}
			if len(got) != len(vs) {
				t.Fatalf("%s: %d events, want versions %d..%d", what, len(got), lo, hi)
			}
			for i, e := range got {
				if e.Version != vs[i] || e.ID != ids[vs[i]] || e.Stream != "s" {
					t.Fatalf("%s: event %d is version %d id %v, want version %d id %v", what, i, e.Version, e.ID, vs[i], ids[vs[i]])
				}
			}
		}
		// checkIDs checks the reader's id set against the live events. A
		// set behind the head is allowed where reads get the head first
		// (the next append catches it up); batched reads keep it at the
		// head.
		checkIDs := func(what string) {
			t.Helper()
			s, ok := r.streams.ids("s")
			if !ok {
				if one > 0 {
					t.Fatalf("%s: no id set", what)
				}
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if h, _ := r.streams.head("s"); s.h.seq != h.seq {
				if one > 0 {
					t.Fatalf("%s: id set at %d, head at %d", what, s.h.seq, h.seq)
				}
				return
			}
			live := 0
			for fp, v := range s.ids {
				if v < floor {
					continue
				}
				live++
				if fingerprint(ids[v]) != fp {
					t.Fatalf("%s: id set holds version %d with another id", what, v)
				}
			}
			if live != int(ver-floor+1) {
				t.Fatalf("%s: id set holds %d live ids, want %d", what, live, ver-floor+1)
			}
		}

		before := r.Requests()
		if _, err := r.ReadStream(ctxT(t), varve.StreamQuery{Stream: "s", Limit: 512}, nil); !errors.Is(err, varve.ErrStreamNotFound) {
			t.Fatalf("read of a stream never written: %v", err)
		}
		if n := r.Requests() - before; n != 1 {
			t.Errorf("read of a stream never written: %d requests, want 1", n)
		}

		for _, n := range []int{3, 2, 1, 4} {
			appendTo(w, n)
		}
		read("cold full read", varve.StreamQuery{Limit: 512}, 1, 10, one)
		checkIDs("cold full read")
		read("from the incarnation's start", varve.StreamQuery{From: 4, Limit: 512}, 4, 10, one)

		appendTo(w, 1) // 11, unseen by the reader
		read("after another backend's append", varve.StreamQuery{From: 8, Limit: 512}, 8, 11, one)
		checkIDs("after another backend's append")

		appendTo(r, 1) // 12
		appendTo(r, 1) // 13
		read("from a remembered commit", varve.StreamQuery{From: 11, Limit: 512}, 11, 13, one)
		read("the last event", varve.StreamQuery{Direction: varve.Backward, Limit: 1}, 13, 13, 1)
		read("nothing new", varve.StreamQuery{From: 14, Limit: 512}, 1, 0, 1)
		read("a page", varve.StreamQuery{From: 2, Limit: 3}, 2, 4, -1)

		if err := w.Truncate(ctxT(t), "s", 6); err != nil {
			t.Fatal(err)
		}
		floor = 6
		read("after a truncation", varve.StreamQuery{Limit: 512}, 6, 13, one)
		checkIDs("after a truncation")
		read("backward after a truncation", varve.StreamQuery{Direction: varve.Backward, Limit: 512}, 6, 13, one)
		appendTo(r, 2) // 14-15: the id set must have been right
		checkIDs("append after a truncation")

		if err := w.Delete(ctxT(t), "s", varve.Any, false); err != nil {
			t.Fatal(err)
		}
		before = r.Requests()
		if _, err := r.ReadStream(ctxT(t), varve.StreamQuery{Stream: "s", Limit: 512}, nil); !errors.Is(err, varve.ErrStreamNotFound) {
			t.Fatalf("read after a delete: %v", err)
		}
		if n := r.Requests() - before; one > 0 && n != 1 {
			t.Errorf("read after a delete: %d requests, want 1", n)
		}
		ids, ver, floor = map[varve.Version]uuid.UUID{}, 0, 1
		appendTo(w, 2)
		appendTo(w, 1)
		read("after a delete and a new incarnation", varve.StreamQuery{Limit: 512}, 1, 3, one)
		checkIDs("after a delete and a new incarnation")
		appendTo(r, 1)
		read("the new incarnation from a version", varve.StreamQuery{From: 2, Limit: 512}, 2, 4, one)
	})
}

// TestReadBatchFallbacks checks reads where the first batch cannot answer
// alone: a stream longer than a cold batch, and a batch holding a chunked
// commit.
func TestReadBatchFallbacks(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("rfall"))
		w := m.open(t, cfg)
		var long []varve.Event
		for range coldBatch + 44 {
			evs := makeEvents(1, 8)
			if _, err := w.Append(ctxT(t), varve.AppendRequest{Stream: "long", Expected: varve.Exact(varve.Version(len(long))), Events: evs}); err != nil {
				t.Fatal(err)
			}
			long = append(long, evs...)
		}
		big := makeEvents(1, 3<<20) // in chunks
		small, last := makeEvents(2, 10), makeEvents(1, 10)
		if _, err := w.Append(ctxT(t), varve.AppendRequest{Stream: "chunked", Expected: varve.NoStream, Events: small}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctxT(t), varve.AppendRequest{Stream: "chunked", Expected: varve.Exact(2), Events: big}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctxT(t), varve.AppendRequest{Stream: "chunked", Expected: varve.Exact(3), Events: last}); err != nil {
			t.Fatal(err)
		}
		chunked := append(append(append([]varve.Event{}, small...), big...), last...)
		for _, tc := range []struct {
			name   string
			stream string
			q      varve.StreamQuery
			want   []varve.Event
			first  varve.Version
		}{
			{"long, whole", "long", varve.StreamQuery{Limit: 512}, long, 1},
			{"long, from 200", "long", varve.StreamQuery{From: 200, Limit: 512}, long[199:], 200},
			{"long, a page from 250", "long", varve.StreamQuery{From: 250, Limit: 10}, long[249:259], 250},
			{"chunked, whole", "chunked", varve.StreamQuery{Limit: 512}, chunked, 1},
			{"chunked, from 2", "chunked", varve.StreamQuery{From: 2, Limit: 512}, chunked[1:], 2},
		} {
			r := m.attach(t, cfg) // knows nothing
			tc.q.Stream = tc.stream
			got, err := r.ReadStream(ctxT(t), tc.q, nil)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			checkEvents(t, got, tc.want, tc.first)
			// And again, with the head and hints cached.
			got, err = r.ReadStream(ctxT(t), tc.q, nil)
			if err != nil {
				t.Fatalf("%s again: %v", tc.name, err)
			}
			checkEvents(t, got, tc.want, tc.first)
		}
	})
}
