package nats

import (
	"errors"
	"slices"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/internal/testenv"
)

// TestMultiAppendCapability: the machine's 2.9 server has no atomic
// batches, so the Store lacks the capability and the backend says why;
// the in-process current server has them.
func TestMultiAppendCapability(t *testing.T) {
	cases := []struct {
		name string
		url  func(*testing.T) string
		want bool
	}{
		{"machine", func(t *testing.T) string { return testenv.NATSURL(t) }, false},
		{"embedded", func(*testing.T) string { return embeddedURL }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(tc.url(t), uniqueName("multi"))
			s, b := mode{}.store(t, cfg)
			ctx := ctxT(t)
			if s.Capabilities().MultiAppend != tc.want || b.MultiAppendAvailable() != tc.want {
				t.Fatalf("MultiAppend: store %v, backend %v; want %v", s.Capabilities().MultiAppend, b.MultiAppendAvailable(), tc.want)
			}
			parts := []varve.StreamAppend{
				{Stream: "acct-1", Expected: varve.NoStream, Events: makeEvents(2, 10)},
				{Stream: "acct-2", Expected: varve.NoStream, Events: makeEvents(1, 10)},
			}
			if !tc.want {
				_, err := s.AppendMulti(ctx, parts)
				if !errors.Is(err, varve.ErrNotSupported) {
					t.Fatalf("store: %v, want ErrNotSupported", err)
				}
				_, err = b.AppendMulti(ctx, varve.MultiAppendRequest{Appends: parts, Categories: []string{"acct", "acct"}})
				if !errors.Is(err, varve.ErrNotSupported) {
					t.Fatalf("backend: %v, want ErrNotSupported", err)
				}
				t.Log(err)
				return
			}
			mustAppendT(t, s, "limit-1", makeEvents(1, 10))
			res, err := s.AppendMulti(ctx, parts, varve.StreamCheck{Stream: "limit-1", Expected: varve.Exact(1)})
			if err != nil {
				t.Fatal(err)
			}
			// The commits follow each other in $all, and the message of the
			// check is not an event.
			all := collectAll(t, s.ReadAll(ctx, varve.Start))
			if len(all) != 4 || all[1].Stream != "acct-1" || all[3].Stream != "acct-2" ||
				all[2].Position != res[0].Position || all[3].Position != res[1].Position || res[1].Position.Commit != res[0].Position.Commit+1 {
				t.Fatalf("$all %+v, results %+v", all, res)
			}
			if _, err := backendtest.CheckInvariants(ctx, s, ""); err != nil {
				t.Fatal(err)
			}
			// A second backend knows no heads: its publish repeats the
			// message ids of the first, which the server refuses, and the
			// id sets then find the retry.
			cold := open(t, cfg)
			cs, err := varve.New(cold, varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			again, err := cs.AppendMulti(ctx, parts, varve.StreamCheck{Stream: "limit-1", Expected: varve.Exact(1)})
			if err != nil || !slices.Equal(again, res) {
				t.Fatalf("retry from a cold backend: %+v, %v; want %+v", again, err, res)
			}
			if n := len(collectAll(t, s.ReadAll(ctx, varve.Start))); n != 4 {
				t.Fatalf("the retry wrote: %d events", n)
			}
		})
	}
}

func mustAppendT(t *testing.T, s *varve.Store, stream string, evs []varve.Event) {
	t.Helper()
	if _, err := s.Append(ctxT(t), stream, varve.NoStream, evs...); err != nil {
		t.Fatal(err)
	}
}

// TestMultiAppendMigratesStream: a stream created before multi-stream
// appends (no atomic publish, no TTLs, no check subject) gets them when a
// backend opens it on a current server, and its events stay as they were.
func TestMultiAppendMigratesStream(t *testing.T) {
	name := uniqueName("migrate")
	cfg := testConfig(embeddedURL, name)
	nc, err := natsgo.Connect(embeddedURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	// What an earlier version created: the stream without the new
	// settings and subject, with its layout marker.
	p := cfg.Prefix
	sc := jetstream.StreamConfig{
		Name: name, Subjects: []string{p + ".e.>", p + ".c.>", p + ".f", p + ".l"},
		Storage: jetstream.FileStorage, AllowDirect: true, Duplicates: DefaultDuplicateWindow,
		RePublish: &jetstream.RePublish{Source: p + ".e.>", Destination: p + ".w.>", HeadersOnly: true},
	}
	if _, err := js.CreateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, p+".l", []byte{layoutCategory, '-'}); err != nil {
		t.Fatal(err)
	}
	s, _ := mode{}.store(t, cfg)
	info, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got := info.CachedInfo().Config
	if !got.AllowAtomicPublish || !got.AllowMsgTTL || !slices.Contains(got.Subjects, cfg.Prefix+".k") || !s.Capabilities().MultiAppend {
		t.Fatalf("stream after open: atomic %v, TTLs %v, subjects %v; store can append to several streams: %v",
			got.AllowAtomicPublish, got.AllowMsgTTL, got.Subjects, s.Capabilities().MultiAppend)
	}
	if _, err := s.AppendMulti(ctx, []varve.StreamAppend{
		{Stream: "a-1", Expected: varve.NoStream, Events: makeEvents(1, 10)},
		{Stream: "b-1", Expected: varve.NoStream, Events: makeEvents(1, 10)},
	}, varve.StreamCheck{Stream: "c-1", Expected: varve.NoStream}); err != nil {
		t.Fatal(err)
	}
}

// TestMultiAppendChunked: a part above max_payload goes in chunks, published
// before the batch; a batch that the server refuses leaves none behind.
func TestMultiAppendChunked(t *testing.T) {
	cfg := testConfig(embeddedURL, uniqueName("multichunks"))
	b := mode{}.open(t, cfg)
	s, err := varve.New(b, varve.Config{MaxEventSize: 4 << 20, MaxAppendBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	big, small := makeEvents(1, 3<<20), makeEvents(2, 10)
	if _, err := s.Append(ctx, "small-1", varve.NoStream, small[:1]...); err != nil {
		t.Fatal(err)
	}
	// Another process appends to small-1: this backend's cached head is
	// one commit behind, so only the server's check can refuse the batch,
	// after the big part's chunks are stored.
	other := open(t, cfg)
	if _, err := other.Append(ctx, varve.AppendRequest{Stream: "small-1", Expected: varve.Any, Events: makeEvents(1, 10)}); err != nil {
		t.Fatal(err)
	}
	lastSeq := func() uint64 {
		t.Helper()
		st, err := b.js.Stream(ctx, cfg.Stream)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.LastSeq
	}
	before := lastSeq()
	_, err = s.AppendMulti(ctx, []varve.StreamAppend{
		{Stream: "big-1", Expected: varve.NoStream, Events: big},
		{Stream: "small-1", Expected: varve.Exact(1), Events: small[1:]},
	})
	if after := lastSeq(); after < before+3 {
		t.Fatalf("the stream's last sequence went from %d to %d: the chunks were not published", before, after)
	}
	var wev *varve.WrongExpectedVersionError
	if !errors.As(err, &wev) || wev.Stream != "small-1" || wev.Actual != 2 {
		t.Fatalf("stale head: %v, want a conflict on small-1 at version 2", err)
	}
	if n := subjectCount(t, b, b.chPrefix+b.token("big-1")); n != 0 {
		t.Fatalf("%d chunk messages left by a refused batch", n)
	}
	res, err := s.AppendMulti(ctx, []varve.StreamAppend{
		{Stream: "big-1", Expected: varve.NoStream, Events: big},
		{Stream: "small-1", Expected: varve.Exact(2), Events: small[1:]},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := subjectCount(t, b, b.chPrefix+b.token("big-1")); n < 3 {
		t.Fatalf("%d chunk messages, want at least 3", n)
	}
	checkEvents(t, collectAll(t, s.ReadStream(ctx, "big-1")), big, 1)
	checkEvents(t, collectAll(t, s.ReadStream(ctx, "small-1", varve.From(3))), small[1:], 3)
	all := collectAll(t, s.ReadAll(ctx, res[0].Position))
	if len(all) != 1 || all[0].Stream != "small-1" || all[0].Position != res[1].Position {
		t.Fatalf("$all after the big part: %+v", all)
	}
}
