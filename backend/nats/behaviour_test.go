package nats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	natsgo "github.com/nats-io/nats.go"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
	"github.com/varve-go/varve/internal/testenv"
)

// The tests in this file check what the conformance suite cannot see from
// outside: floors written by another process, chunked commits, retries
// after the dedupe window, scans over many commits, markers at the end of
// the log. They run in three modes: the machine's 2.9 server (consumer
// scans and walks along prev sequences), the in-process server (batched
// direct gets) and the in-process server with batched gets turned off.

type mode struct {
	name    string
	url     string
	noBatch bool
}

func forModes(t *testing.T, fn func(*testing.T, mode)) {
	modes := []struct {
		name    string
		url     func(*testing.T) string
		noBatch bool
	}{
		{"machine", func(t *testing.T) string { return testenv.NATSURL(t) }, false},
		{"embedded", func(*testing.T) string { return embeddedURL }, false},
		{"embedded-nobatch", func(*testing.T) string { return embeddedURL }, true},
	}
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			fn(t, mode{name: md.name, url: md.url(t), noBatch: md.noBatch})
		})
	}
}

// open opens a backend whose stream and buckets are deleted when the test
// ends.
func (m mode) open(tb testing.TB, cfg Config) *Backend {
	b := open(tb, cfg)
	// The streams are deleted over a connection of the cleanup's own: the
	// backend's may be closed by then (the benchmark suite closes its store).
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		nc, err := natsgo.Connect(b.cfg.URL)
		if err != nil {
			tb.Errorf("delete test streams: %v", err)
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			tb.Errorf("delete test streams: %v", err)
			return
		}
		for _, name := range []string{b.cfg.Stream, "KV_" + b.cfg.SnapshotBucket, "KV_" + b.cfg.CheckpointBucket, "KV_" + b.cfg.KeyBucket} {
			if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				tb.Errorf("delete test stream %s: %v", name, err)
			}
		}
	})
	if m.noBatch {
		b.c.DisableBatchGets()
	}
	return b
}

func (m mode) store(tb testing.TB, cfg Config) (*varve.Store, *Backend) {
	tb.Helper()
	b := m.open(tb, cfg)
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	return s, b
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

func makeEvents(n, size int) []varve.Event {
	evs := make([]varve.Event, n)
	for i := range evs {
		evs[i] = varve.Event{ID: varve.NewEventID(), Type: "T", Data: bytes.Repeat([]byte{byte('a' + i%26)}, size)}
	}
	return evs
}

func collectAll(tb testing.TB, seq iter.Seq2[varve.RecordedEvent, error]) []varve.RecordedEvent {
	tb.Helper()
	var out []varve.RecordedEvent
	for e, err := range seq {
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func checkEvents(tb testing.TB, got []varve.RecordedEvent, want []varve.Event, firstVersion varve.Version) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || !bytes.Equal(got[i].Data, want[i].Data) || got[i].Version != firstVersion+varve.Version(i) {
			tb.Fatalf("event %d: id %s version %d (%d bytes), want id %s version %d (%d bytes)",
				i, got[i].ID, got[i].Version, len(got[i].Data), want[i].ID, firstVersion+varve.Version(i), len(want[i].Data))
		}
	}
}

// subjectCount returns how many messages the stream holds on subject.
func subjectCount(tb testing.TB, b *Backend, subject string) uint64 {
	tb.Helper()
	s, err := b.js.Stream(ctxT(tb), b.cfg.Stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctxT(tb), jetstream.WithSubjectFilter(subject))
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Subjects[subject]
}

func TestTruncateInsideCommitSeenByAnotherBackend(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("floor"))
		writer, _ := m.store(t, cfg)
		start, err := writer.LastPosition(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		evs := makeEvents(10, 10)
		if _, err := writer.Append(ctxT(t), "s", varve.NoStream, evs...); err != nil {
			t.Fatal(err)
		}
		reader, _ := m.store(t, cfg) // opened before the truncation: must pick up the floor
		if n := len(collectAll(t, reader.ReadAll(ctxT(t), start))); n != 10 {
			t.Fatalf("$all before truncation: %d events", n)
		}
		if err := writer.Truncate(ctxT(t), "s", 4); err != nil {
			t.Fatal(err)
		}
		later, _ := m.store(t, cfg) // opened after it: loads the floor entries
		for name, s := range map[string]*varve.Store{"writer": writer, "reader": reader, "later": later} {
			checkEvents(t, collectAll(t, s.ReadAll(ctxT(t), start)), evs[3:], 4)
			checkEvents(t, collectAll(t, s.ReadStream(ctxT(t), "s")), evs[3:], 4)
			info, err := s.StreamInfo(ctxT(t), "s")
			if err != nil || info.Version != 10 {
				t.Fatalf("%s: info %+v %v", name, info, err)
			}
		}
	})
}

func TestChunkedCommits(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		b := m.open(t, testConfig(m.url, uniqueName("chunks")))
		s, err := varve.New(b, varve.Config{MaxEventSize: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		big := makeEvents(1, 3<<20) // three times max_payload
		many := makeEvents(4000, 500)
		small := makeEvents(2, 10)
		for _, step := range []struct {
			evs []varve.Event
			exp varve.ExpectedVersion
		}{{big, varve.NoStream}, {many, varve.Exact(1)}, {small, varve.Exact(4001)}} {
			if _, err := s.Append(ctxT(t), "c", step.exp, step.evs...); err != nil {
				t.Fatal(err)
			}
		}
		if n := subjectCount(t, b, b.chPrefix+b.token("c")); n < 5 {
			t.Fatalf("%d chunk messages, want at least 5", n)
		}
		all := append(append(append([]varve.Event{}, big...), many...), small...)
		checkEvents(t, collectAll(t, s.ReadStream(ctxT(t), "c")), all, 1)
		checkEvents(t, collectAll(t, s.ReadAll(ctxT(t), varve.Start)), all, 1)
		// The head's fast path reads the chunks too.
		if _, err := s.Append(ctxT(t), "d", varve.NoStream, many...); err != nil {
			t.Fatal(err)
		}
		checkEvents(t, collectAll(t, s.ReadStream(ctxT(t), "d", varve.From(3990))), many[3989:], 3990)
		// An idempotent retry of a chunked commit stores nothing.
		res, err := s.Append(ctxT(t), "c", varve.Any, many...)
		if err != nil || res.FirstVersion != 2 || res.LastVersion != 4001 {
			t.Fatalf("retry of a chunked commit: %+v %v", res, err)
		}
		if err := s.Truncate(ctxT(t), "c", 3000); err != nil {
			t.Fatal(err)
		}
		checkEvents(t, collectAll(t, s.ReadStream(ctxT(t), "c")), all[2999:], 3000)
		if n := subjectCount(t, b, b.chPrefix+b.token("c")); n == 0 {
			t.Fatalf("truncation inside a chunked commit removed its chunks")
		}
		if err := s.Delete(ctxT(t), "c", varve.Any); err != nil {
			t.Fatal(err)
		}
		if n := subjectCount(t, b, b.chPrefix+b.token("c")); n != 0 {
			t.Fatalf("%d chunk messages left after delete", n)
		}
	})
}

// TestRetryAfterDedupeWindow: with a 1s dedupe window, a retry 1.5s later is
// recognised by the stream's event id set.
func TestRetryAfterDedupeWindow(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("window"))
		cfg.DuplicateWindow = time.Second
		s, _ := m.store(t, cfg)
		v4 := func(n int) []varve.Event {
			evs := makeEvents(n, 5)
			for i := range evs {
				evs[i].ID = uuid.New()
			}
			return evs
		}
		cases := []struct {
			name   string
			evs    []varve.Event
			retry  varve.ExpectedVersion
			reruns bool // a retry with this expectation is detected
		}{
			{"v7/any", makeEvents(3, 5), varve.Any, true},
			{"v7/exists", makeEvents(3, 5), varve.StreamExists, true},
			{"v7/no-stream", makeEvents(3, 5), varve.NoStream, true},
			{"v7/exact", makeEvents(3, 5), varve.Exact(0), true},
			{"v4/no-stream", v4(3), varve.NoStream, true},
			{"v4/exact", v4(3), varve.Exact(0), true},
		}
		orig := map[string]varve.AppendResult{}
		for _, tc := range cases {
			res, err := s.Append(ctxT(t), tc.name, varve.NoStream, tc.evs...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(ctxT(t), tc.name, varve.Any, makeEvents(1, 5)...); err != nil {
				t.Fatal(err)
			}
			orig[tc.name] = res
		}
		time.Sleep(1500 * time.Millisecond)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res, err := s.Append(ctxT(t), tc.name, tc.retry, tc.evs...)
				if err != nil || res != orig[tc.name] {
					t.Fatalf("retry after the window: %+v %v, want %+v", res, err, orig[tc.name])
				}
				if n := len(collectAll(t, s.ReadStream(ctxT(t), tc.name))); n != 4 {
					t.Fatalf("stream has %d events after the retry, want 4", n)
				}
				mixed := append([]varve.Event{tc.evs[0]}, makeEvents(1, 5)...)
				if _, err := s.Append(ctxT(t), tc.name, tc.retry, mixed...); !errors.Is(err, varve.ErrDuplicateEvent) {
					t.Fatalf("known first id with a new one after the window: %v", err)
				}
			})
		}
	})
}

// TestManyCommits reads a stream of single-event commits in pages, both
// ways, so reads scan the subject (and use their start hints).
func TestManyCommits(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("many"))
		s, _ := m.store(t, cfg)
		var want []varve.Event
		for i := range 60 {
			evs := makeEvents(1+i%3, 8)
			want = append(want, evs...)
			if _, err := s.Append(ctxT(t), "m", varve.Exact(varve.Version(len(want)-len(evs))), evs...); err != nil {
				t.Fatal(err)
			}
		}
		fresh, _ := m.store(t, cfg)
		for _, st := range []*varve.Store{s, fresh} {
			for _, page := range []int{1, 7, 50, 512} {
				checkEvents(t, collectAll(t, st.ReadStream(ctxT(t), "m", varve.PageSize(page))), want, 1)
				back := collectAll(t, st.ReadStream(ctxT(t), "m", varve.PageSize(page), varve.ReadBackward()))
				for i := range back {
					if back[i].ID != want[len(want)-1-i].ID {
						t.Fatalf("page %d backward: event %d is %s", page, i, back[i].ID)
					}
				}
			}
			got := collectAll(t, st.ReadStream(ctxT(t), "m", varve.From(50), varve.Limit(20)))
			checkEvents(t, got, want[49:69], 50)
		}
	})
}

func TestLastPositionSkipsMarkers(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		s, _ := m.store(t, testConfig(m.url, uniqueName("last")))
		res, err := s.Append(ctxT(t), "a", varve.NoStream, makeEvents(3, 1)...)
		if err != nil {
			t.Fatal(err)
		}
		// A long stream deleted at the end of the log: markers and purged
		// messages are all that follow the last commit.
		for i := range 100 {
			if _, err := s.Append(ctxT(t), "b", varve.Exact(varve.Version(i)), makeEvents(1, 1)...); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Truncate(ctxT(t), "b", 50); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctxT(t), "b", varve.Any); err != nil {
			t.Fatal(err)
		}
		if err := s.Tombstone(ctxT(t), "never", varve.Any); err != nil {
			t.Fatal(err)
		}
		p, err := s.LastPosition(ctxT(t))
		if err != nil || p != res.Position {
			t.Fatalf("last position %s %v, want %s", p, err, res.Position)
		}
		if got := collectAll(t, s.ReadAll(ctxT(t), varve.Start)); len(got) != 3 || got[2].Position != p {
			t.Fatalf("$all: %d events", len(got))
		}
	})
}

// TestDeleteRacesAppends: appenders with Any race a delete at an exact
// version; afterwards the stream is one consistent incarnation.
func TestDeleteRacesAppends(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		s, _ := m.store(t, testConfig(m.url, uniqueName("race")))
		for round := range 10 {
			stream := fmt.Sprintf("r%d", round)
			if _, err := s.Append(ctxT(t), stream, varve.NoStream, makeEvents(2, 1)...); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 4)
			for range 4 {
				go func() {
					_, err := s.Append(ctxT(t), stream, varve.Any, makeEvents(1, 1)...)
					done <- err
				}()
			}
			derr := s.Delete(ctxT(t), stream, varve.Exact(2))
			for range 4 {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if derr != nil && !errors.Is(derr, varve.ErrWrongExpectedVersion) {
				t.Fatal(derr)
			}
			got, err := func() ([]varve.RecordedEvent, error) {
				var out []varve.RecordedEvent
				for e, err := range s.ReadStream(ctxT(t), stream) {
					if err != nil {
						return out, err
					}
					out = append(out, e)
				}
				return out, nil
			}()
			if errors.Is(err, varve.ErrStreamNotFound) {
				continue // deleted after every append
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range got {
				if e.Version != varve.Version(i+1) {
					t.Fatalf("round %d: versions not 1..n: %d at %d", round, e.Version, i)
				}
			}
			info, err := s.StreamInfo(ctxT(t), stream)
			if err != nil || info.Version != varve.Version(len(got)) {
				t.Fatalf("round %d: info %+v, %d events", round, info, len(got))
			}
		}
	})
}

func TestParseURL(t *testing.T) {
	cases := []struct {
		raw  string
		want Config
		err  bool
	}{
		{raw: "nats://127.0.0.1:4222", want: Config{URL: "nats://127.0.0.1:4222"}},
		{raw: "nats://u:p@h:1?stream=ES&prefix=a.b&replicas=3&memory=true&dupe_window=1h&timeout=3s&snapshots=S&checkpoints=C&keys=K&no_notify=true&watch_poll=250ms",
			want: Config{URL: "nats://u:p@h:1", Stream: "ES", Prefix: "a.b", Replicas: 3, MemoryStorage: true,
				DuplicateWindow: time.Hour, RequestTimeout: 3 * time.Second, SnapshotBucket: "S", CheckpointBucket: "C", KeyBucket: "K",
				NoNotify: true, WatchPoll: 250 * time.Millisecond}},
		{raw: "postgres://h", err: true},
		{raw: "nats://h?stream=a.b", err: true},
		{raw: "nats://h?prefix=a..b", err: true},
		{raw: "nats://h?prefix=a.*", err: true},
		{raw: "nats://h?replicas=x", err: true},
		{raw: "nats://h?bogus=1", err: true},
		{raw: "nats://h?no_notify=maybe", err: true},
		{raw: "nats://h?watch_poll=-1s", err: true},
		{raw: "nats://h?watch_poll=soon", err: true},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			got, err := ParseURL(tc.raw)
			if tc.err {
				if !errors.Is(err, varve.ErrInvalidArgument) {
					t.Fatalf("got %+v %v, want an invalid-argument error", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.Options = nil
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func FuzzStreamID(f *testing.F) {
	for _, s := range []string{"order-1", "a.b", "=41", "x y/z", "\xff", "ünï", strings.Repeat("=", 5)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := encodeID(s)
		if !isName(enc) && !(enc == "" && s == "") {
			for i := 0; i < len(enc); i++ {
				if !safeByte(enc[i]) && enc[i] != '=' {
					t.Fatalf("%q encodes to %q, not a subject token", s, enc)
				}
			}
		}
		dec, err := decodeID(enc)
		if err != nil || dec != s {
			t.Fatalf("%q -> %q -> %q %v", s, enc, dec, err)
		}
	})
}

// FuzzMessage feeds arbitrary bodies to the decoders: they fail cleanly.
func FuzzMessage(f *testing.F) {
	body := appendEvents(make([]byte, stateLen), makeEvents(3, 4))
	putState(body, state{kind: kindCommit, version: 3})
	f.Add(body)
	chunked := appendChunkRef(make([]byte, stateLen), chunkRef{events: 2, size: 10, seqs: []uint64{4, 5}})
	putState(chunked, state{kind: kindChunked, version: 2})
	f.Add(chunked)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHead(jsclient.Msg{Seq: 1, Data: b})
		if err != nil || h.st.kind != kindCommit {
			return
		}
		evs, err := emit(nil, b[stateLen:], "s", 1, h.st, 0, 0, h.st.version, 1<<20, &budget{})
		if err == nil && len(evs) != h.n {
			t.Fatalf("%d events decoded, header says %d", len(evs), h.n)
		}
	})
}

func TestDeleteRemovesSnapshot(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		s, b := m.store(t, testConfig(m.url, uniqueName("snapdel")))
		if err := s.Delete(ctxT(t), "x", varve.Any); !errors.Is(err, varve.ErrStreamNotFound) {
			t.Fatalf("delete of a missing stream: %v", err)
		}
		if _, err := s.Append(ctxT(t), "x", varve.NoStream, makeEvents(3, 1)...); err != nil {
			t.Fatal(err)
		}
		if err := b.SaveSnapshot(ctxT(t), varve.Snapshot{Stream: "x", Version: 3, Data: []byte("s")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctxT(t), "x", varve.Exact(3)); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := b.LoadSnapshot(ctxT(t), "x"); err != nil || ok {
			t.Fatalf("snapshot of a deleted stream: ok=%v err=%v", ok, err)
		}
	})
}
