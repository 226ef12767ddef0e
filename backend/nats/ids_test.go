package nats

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// The tests in this file check Features.UniqueEventIDs beyond the
// conformance suite: every id of an append is checked against the stream
// by a backend that has nothing cached, by two backends (two processes) on
// one stream, and across truncations, deletes and an id-set bound that
// evicts; the memory backend is the reference for what is allowed.

// idOp is one step of a scenario: an append of named events, a truncation
// or a delete, and the outcome the memory backend gives.
type idOp struct {
	do   string // "append", "truncate", "delete", "tombstone"
	ids  string // append: names of the events, space separated
	exp  varve.ExpectedVersion
	n    varve.Version // truncate: the new first version
	want string        // "first-last", "dup", "conflict", "deleted", "ok"
}

// attach opens another backend on a stream that m.open created: closed,
// but not deleted, when the test ends.
func (m mode) attach(tb testing.TB, cfg Config) *Backend {
	b := open(tb, cfg)
	if m.noBatch {
		b.c.DisableBatchGets()
	}
	return b
}

func app(ids, want string) idOp { return idOp{do: "append", ids: ids, exp: varve.Any, want: want} }

func appAt(ids string, exp varve.ExpectedVersion, want string) idOp {
	return idOp{do: "append", ids: ids, exp: exp, want: want}
}

// names gives each event name of a scenario an id of its own.
type names map[string]uuid.UUID

func (nm names) events(ids string) []varve.Event {
	var evs []varve.Event
	for _, name := range strings.Fields(ids) {
		id, ok := nm[name]
		if !ok {
			id = varve.NewEventID()
			nm[name] = id
		}
		evs = append(evs, varve.Event{ID: id, Type: "T", Data: []byte(name)})
	}
	return evs
}

func outcome(res varve.AppendResult, err error) string {
	switch {
	case err == nil:
		return fmt.Sprintf("%d-%d", res.FirstVersion, res.LastVersion)
	case errors.Is(err, varve.ErrDuplicateEvent):
		return "dup"
	case errors.Is(err, varve.ErrWrongExpectedVersion):
		return "conflict"
	case errors.Is(err, varve.ErrStreamDeleted):
		return "deleted"
	}
	return "error: " + err.Error()
}

// run applies op to stream on be and returns its outcome.
func (op idOp) run(ctx context.Context, be varve.Backend, stream string, nm names) string {
	var err error
	switch op.do {
	case "append":
		res, err := be.Append(ctx, varve.AppendRequest{Stream: stream, Expected: op.exp, Events: nm.events(op.ids)})
		return outcome(res, err)
	case "truncate":
		err = be.Truncate(ctx, stream, op.n)
	case "delete", "tombstone":
		err = be.Delete(ctx, stream, varve.Any, op.do == "tombstone")
	}
	if err != nil {
		return outcome(varve.AppendResult{}, err)
	}
	return "ok"
}

// storedIDs returns the ids of the stream's events, in order.
func storedIDs(t *testing.T, be varve.Backend, stream string) []uuid.UUID {
	t.Helper()
	evs, err := be.ReadStream(ctxT(t), varve.StreamQuery{Stream: stream, Limit: 1 << 20}, nil)
	if err != nil && !errors.Is(err, varve.ErrStreamNotFound) && !errors.Is(err, varve.ErrStreamDeleted) {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, len(evs))
	for i := range evs {
		ids[i] = evs[i].ID
	}
	return ids
}

// TestUniqueIDScenarios runs scenarios on the memory backend and on NATS,
// where the steps run on one backend, alternate between two (two
// processes, each with its own cache), or each run on a new backend
// (nothing cached). Every step must give memory's outcome, and the streams
// must end with the same events.
func TestUniqueIDScenarios(t *testing.T) {
	long := []idOp{}
	for i := 1; i <= 40; i++ {
		long = append(long, app(fmt.Sprintf("e%d", i), fmt.Sprintf("%d-%d", i, i)))
	}
	scenarios := []struct {
		name string
		ops  []idOp
	}{
		{"duplicate in the middle of a batch", []idOp{
			app("a b c", "1-3"), app("d e b f", "dup"), app("d e f", "4-6"), app("g h i j c", "dup"),
		}},
		{"retries and partial matches", []idOp{
			app("a b c", "1-3"), app("a b c", "1-3"), app("a b", "1-2"), app("b c", "2-3"),
			app("a x", "dup"), app("c a", "dup"), app("c d", "dup"), app("d c", "dup"), app("d", "4-4"),
		}},
		{"retry before expectation, expectation before other ids", []idOp{
			appAt("a b c", varve.NoStream, "1-3"), appAt("a b c", varve.NoStream, "1-3"),
			appAt("a b c", varve.Exact(7), "1-3"), appAt("x y", varve.Exact(1), "conflict"),
			appAt("x a", varve.Exact(1), "conflict"), appAt("x a", varve.Exact(3), "dup"),
			appAt("x y", varve.Exact(3), "4-5"),
		}},
		{"truncate a whole commit", []idOp{
			app("a b c", "1-3"), app("d e", "4-5"), {do: "truncate", n: 4, want: "ok"},
			app("x a", "6-7"), app("a", "7-7"), app("y b", "8-9"), app("z d", "dup"),
		}},
		{"truncate inside a commit", []idOp{
			app("a b c", "1-3"), app("d e", "4-5"), {do: "truncate", n: 3, want: "ok"},
			app("x b", "6-7"), app("y c", "dup"), app("c d", "3-4"), app("b", "7-7"),
		}},
		{"truncate everything", []idOp{
			app("a b c", "1-3"), {do: "truncate", n: 10, want: "ok"}, app("c", "4-4"), app("x c", "dup"),
		}},
		{"truncate a long stream", append(long,
			app("x e7", "dup"), idOp{do: "truncate", n: 30, want: "ok"}, app("y e7", "41-42"),
			app("z e35", "dup"), app("e29", "43-43"), app("e30 e31", "30-31"),
		)},
		{"delete and re-create", []idOp{
			app("a b c", "1-3"), {do: "delete", want: "ok"}, app("a b c", "1-3"), app("x b", "dup"),
			{do: "delete", want: "ok"}, app("x b", "1-2"), app("a", "3-3"),
		}},
		{"tombstone", []idOp{
			app("a b c", "1-3"), {do: "tombstone", want: "ok"}, app("d", "deleted"), app("a", "deleted"),
		}},
	}
	// memory is the reference: the table says what it does.
	for _, sc := range scenarios {
		be, nm := memory.New(), names{}
		for i, op := range sc.ops {
			if got := op.run(ctxT(t), be, "s", nm); got != op.want {
				t.Fatalf("memory, %s, step %d (%s %q): %s, table says %s", sc.name, i, op.do, op.ids, got, op.want)
			}
		}
	}
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("ids"))
		keep := m.open(t, cfg) // owns the JetStream stream for the test
		for _, how := range []string{"one", "two", "cold"} {
			t.Run(how, func(t *testing.T) {
				for si, sc := range scenarios {
					stream := fmt.Sprintf("%s-%d", how, si)
					ref, nm := memory.New(), names{}
					backends := []*Backend{keep, m.attach(t, cfg)}
					for i, op := range sc.ops {
						be := keep
						switch how {
						case "two":
							be = backends[i%2]
						case "cold":
							be = m.attach(t, cfg)
						}
						want := op.run(ctxT(t), ref, stream, nm)
						if got := op.run(ctxT(t), be, stream, nm); got != want {
							t.Fatalf("%s, step %d (%s %q): %s, memory gives %s", sc.name, i, op.do, op.ids, got, want)
						}
						if how == "cold" {
							_ = be.Close()
						}
					}
					got, want := storedIDs(t, keep, stream), storedIDs(t, ref, stream)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("%s: stream holds %v, memory %v", sc.name, got, want)
					}
				}
			})
		}
	})
}

// TestUniqueIDsCold: a backend with nothing cached finds a known id in the
// middle of a batch, whatever the stream looks like (a few commits read by
// walking back, many read by a scan, chunked commits, a truncated stream, a
// re-created one), and stores nothing of the batch.
func TestUniqueIDsCold(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("cold"))
		writer := m.open(t, cfg)
		ws, err := varve.New(writer, varve.Config{MaxEventSize: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		shapes := []struct {
			name  string
			build func(t *testing.T, stream string) []varve.Event // returns the live events
		}{
			{"few commits", func(t *testing.T, stream string) []varve.Event {
				evs := makeEvents(5, 10)
				appendAll(t, ws, stream, evs[:2], evs[2:3], evs[3:])
				return evs
			}},
			{"many commits", func(t *testing.T, stream string) []varve.Event {
				evs := makeEvents(60, 10)
				var parts [][]varve.Event
				for i := 0; i < len(evs); i += 2 {
					parts = append(parts, evs[i:i+2])
				}
				appendAll(t, ws, stream, parts...)
				return evs
			}},
			{"chunked commits", func(t *testing.T, stream string) []varve.Event {
				big, many := makeEvents(1, 2<<20), makeEvents(3000, 500)
				appendAll(t, ws, stream, big, many)
				return append(big, many...)
			}},
			{"truncated", func(t *testing.T, stream string) []varve.Event {
				evs := makeEvents(30, 10)
				appendAll(t, ws, stream, evs[:10], evs[10:20], evs[20:])
				if err := ws.Truncate(ctxT(t), stream, 15); err != nil {
					t.Fatal(err)
				}
				return evs[14:]
			}},
			{"re-created", func(t *testing.T, stream string) []varve.Event {
				appendAll(t, ws, stream, makeEvents(10, 10))
				if err := ws.Delete(ctxT(t), stream, varve.Any); err != nil {
					t.Fatal(err)
				}
				evs := makeEvents(7, 10)
				appendAll(t, ws, stream, evs[:3], evs[3:])
				return evs
			}},
		}
		for _, sh := range shapes {
			t.Run(sh.name, func(t *testing.T) {
				stream := strings.ReplaceAll(sh.name, " ", "-")
				live := sh.build(t, stream)
				info, err := ws.StreamInfo(ctxT(t), stream)
				if err != nil {
					t.Fatal(err)
				}
				for _, at := range []int{0, len(live) / 2, len(live) - 1} {
					for _, exp := range []varve.ExpectedVersion{varve.Exact(info.Version), varve.Any} {
						cold := m.attach(t, cfg)
						batch := makeEvents(9, 10)
						batch[4].ID = live[at].ID
						_, err := cold.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: exp, Events: batch})
						if !errors.Is(err, varve.ErrDuplicateEvent) {
							t.Fatalf("event %d of the stream in a batch, expecting %v: %v, want ErrDuplicateEvent", at, exp, err)
						}
						_ = cold.Close()
					}
				}
				after, err := ws.StreamInfo(ctxT(t), stream)
				if err != nil || after.Version != info.Version {
					t.Fatalf("stream info after refused batches: %+v %v, want version %d", after, err, info.Version)
				}
				// A batch of new ids goes in, from a cold backend too.
				cold := m.attach(t, cfg)
				res, err := cold.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Exact(info.Version), Events: makeEvents(3, 10)})
				if err != nil || res.LastVersion != info.Version+3 {
					t.Fatalf("new ids: %+v %v", res, err)
				}
			})
		}
	})
}

func appendAll(t *testing.T, s *varve.Store, stream string, parts ...[]varve.Event) {
	t.Helper()
	for _, p := range parts {
		if _, err := s.Append(ctxT(t), stream, varve.Any, p...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUniqueIDsTwoBackends: two backends (two processes) on one stream,
// each with its head and id set cached. The first stores a batch; the
// second then appends a batch holding one of its ids, from a head that
// does not know the first's commit. It gets ErrDuplicateEvent, and nothing
// of its batch is stored.
func TestUniqueIDsTwoBackends(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("two"))
		first, second := m.open(t, cfg), m.attach(t, cfg)
		cases := []struct {
			name     string
			at       int  // where the known id goes in the second's batch of 5
			exact    bool // the second expects the version after the first's commit
			big      bool // the first's commit is chunked
			manyMore int  // commits the first stores after the known id
		}{
			{name: "first id", at: 0},
			{name: "middle id", at: 2},
			{name: "last id", at: 4},
			{name: "middle id, exact version", at: 2, exact: true},
			{name: "first id, exact version", at: 0, exact: true},
			{name: "behind by many commits", at: 3, manyMore: 40},
			{name: "chunked commit", at: 1, big: true},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				stream := fmt.Sprintf("two-%d", i)
				for _, be := range []*Backend{first, second} { // both cache the stream
					if _, err := be.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: makeEvents(2, 10)}); err != nil {
						t.Fatal(err)
					}
				}
				known := makeEvents(3, 10)
				if tc.big {
					known = append(known, makeEvents(2500, 500)...)
				}
				res, err := first.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: known})
				if err != nil {
					t.Fatal(err)
				}
				for range tc.manyMore {
					if res, err = first.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: makeEvents(1, 10)}); err != nil {
						t.Fatal(err)
					}
				}
				before := storedIDs(t, first, stream)
				batch := makeEvents(5, 10)
				batch[tc.at].ID = known[1].ID
				exp := varve.Any
				if tc.exact {
					exp = varve.Exact(res.LastVersion)
				}
				_, err = second.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: exp, Events: batch})
				if !errors.Is(err, varve.ErrDuplicateEvent) {
					t.Fatalf("second backend's batch with a known id: %v, want ErrDuplicateEvent", err)
				}
				if after := storedIDs(t, first, stream); len(after) != len(before) {
					t.Fatalf("the refused batch changed the stream: %d events, had %d", len(after), len(before))
				}
				// The second goes on from what it learnt.
				if _, err := second.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Exact(res.LastVersion), Events: makeEvents(2, 10)}); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// TestIDSetBound: with room for a few streams and ids only, the state of
// many streams is evicted and rebuilt, and every answer stays right.
func TestIDSetBound(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("bound"))
		cfg.CachedStreams, cfg.CachedEventIDs = 4, 16
		b := m.open(t, cfg)
		const streams = 30
		stored := make([][]varve.Event, streams)
		for round := range 3 {
			for i := range streams {
				stream := fmt.Sprintf("b%d", i)
				v := varve.Version(len(stored[i]))
				if round > 0 {
					// A known id in the middle: refused.
					batch := makeEvents(3, 5)
					batch[1].ID = stored[i][(i+round)%len(stored[i])].ID
					_, err := b.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Exact(v), Events: batch})
					if !errors.Is(err, varve.ErrDuplicateEvent) {
						t.Fatalf("round %d, stream %d: %v, want ErrDuplicateEvent", round, i, err)
					}
					// An exact retry of the last commit: its original result.
					last := stored[i][len(stored[i])-4:]
					res, err := b.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: last})
					if err != nil || res.FirstVersion != v-3 || res.LastVersion != v {
						t.Fatalf("round %d, stream %d: retry %+v %v, want %d-%d", round, i, res, err, v-3, v)
					}
				}
				evs := makeEvents(4, 5)
				res, err := b.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Exact(v), Events: evs})
				if err != nil || res.LastVersion != v+4 {
					t.Fatalf("round %d, stream %d: %+v %v", round, i, res, err)
				}
				stored[i] = append(stored[i], evs...)
			}
		}
		b.streams.c.CleanUp()
		if w, bound := b.streams.c.WeightedSize(), uint64(cfg.CachedStreams+cfg.CachedEventIDs); w > bound {
			t.Fatalf("stream cache weighs %d, bound %d", w, bound)
		}
		for i := range streams {
			checkEvents(t, mustReadAll(t, b, fmt.Sprintf("b%d", i)), stored[i], 1)
		}
	})
}

func mustReadAll(t *testing.T, b *Backend, stream string) []varve.RecordedEvent {
	t.Helper()
	evs, err := b.ReadStream(ctxT(t), varve.StreamQuery{Stream: stream, Limit: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestIDFingerprintCollision: two ids of one stream with the same
// fingerprint are told apart, for the first id of an append and the others.
func TestIDFingerprintCollision(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("collide"))
		b := m.open(t, cfg)
		a := varve.NewEventID()
		twin := a
		binary.LittleEndian.PutUint64(twin[:8], binary.LittleEndian.Uint64(a[:8])^0x5a5a)
		binary.LittleEndian.PutUint64(twin[8:], binary.LittleEndian.Uint64(a[8:])^0x5a5a)
		if twin == a || fingerprint(twin) != fingerprint(a) {
			t.Fatal("no twin")
		}
		ev := func(id uuid.UUID) varve.Event { return varve.Event{ID: id, Type: "T"} }
		fresh := func() varve.Event { return makeEvents(1, 1)[0] }
		steps := []struct {
			name string
			evs  []varve.Event
			want string
		}{
			{"store a", []varve.Event{fresh(), ev(a)}, "1-2"},
			{"its twin as a first id is new", []varve.Event{ev(twin), fresh()}, "3-4"},
			{"a retried", []varve.Event{ev(a)}, "2-2"},
			{"the twin retried", []varve.Event{ev(twin)}, "3-3"},
			{"a in the middle", []varve.Event{fresh(), ev(a), fresh()}, "dup"},
			{"the twin in the middle", []varve.Event{fresh(), ev(twin)}, "dup"},
		}
		for _, be := range []string{"warm", "cold"} {
			stream := "c-" + be
			for _, st := range steps {
				target := b
				if be == "cold" {
					target = m.attach(t, cfg)
				}
				res, err := target.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: varve.Any, Events: st.evs})
				if got := outcome(res, err); got != st.want {
					t.Fatalf("%s, %s: %s, want %s", be, st.name, got, st.want)
				}
			}
		}
	})
}

// TestAppendRequests counts the server requests of appends: one publish
// when the head and id set are cached (also after a full read by a backend
// that had nothing cached), one for a new stream.
func TestAppendRequests(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("reqs"))
		b := m.open(t, cfg)
		// want < 0: any number.
		count := func(t *testing.T, be *Backend, what string, want int, fn func() error) {
			t.Helper()
			before := be.Requests()
			if err := fn(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := be.Requests() - before; want >= 0 && got != uint64(want) {
				t.Fatalf("%s: %d requests, want %d", what, got, want)
			}
		}
		app := func(be *Backend, stream string, exp varve.ExpectedVersion, n int) func() error {
			return func() error {
				_, err := be.Append(ctxT(t), varve.AppendRequest{Stream: stream, Expected: exp, Events: makeEvents(n, 10)})
				return err
			}
		}
		count(t, b, "new stream", 1, app(b, "r", varve.NoStream, 3))
		count(t, b, "exact, cached", 1, app(b, "r", varve.Exact(3), 10))
		count(t, b, "any, cached", 1, app(b, "r", varve.Any, 1))
		count(t, b, "stream exists, cached", 1, app(b, "r", varve.StreamExists, 2))
		cold := m.attach(t, cfg)
		count(t, cold, "full read", -1, func() error {
			_, err := cold.ReadStream(ctxT(t), varve.StreamQuery{Stream: "r", Limit: 512}, nil)
			return err
		})
		count(t, cold, "exact after a full read", 1, app(cold, "r", varve.Exact(16), 1))
		// The other backend's head is one commit behind: its read of the
		// head follows the commit, so the append after it is one publish.
		count(t, b, "head read", 1, func() error {
			_, err := b.StreamInfo(ctxT(t), "r")
			return err
		})
		count(t, b, "exact after following a commit", 1, app(b, "r", varve.Exact(17), 1))
	})
}
