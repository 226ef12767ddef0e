package nats

import (
	"fmt"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// consumersOf counts the consumers of the backend's JetStream stream.
func consumersOf(t *testing.T, b *Backend) int {
	t.Helper()
	s, err := b.js.Stream(ctxT(t), b.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Consumers
}

// TestAllCursors: a reader that pages through $all keeps one cursor (on
// servers before 2.11, one consumer) from page to page; the backend keeps
// at most maxCursors of them, releases one that stays idle, and all on
// Close, leaving no consumer on the server.
func TestAllCursors(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("cursors"))
		w := m.open(t, cfg)
		const streams, commits = 5, 40
		for i := range commits {
			if _, err := w.Append(ctxT(t), varve.AppendRequest{Stream: fmt.Sprintf("s%d", i%streams), Expected: varve.Any, Events: makeEvents(3, 10)}); err != nil {
				t.Fatal(err)
			}
		}
		consumers := m.name != "embedded" // servers without batched gets
		r := m.attach(t, cfg)
		requests := r.Requests()
		var after varve.Position
		pages, events := 0, 0
		for {
			page, err := r.ReadAll(ctxT(t), varve.AllQuery{After: after, Limit: 7}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			pages++
			events += len(page)
			after = page[len(page)-1].Position
			if n := r.cursors.open(); n != 1 {
				t.Fatalf("page %d: %d open cursors, want 1", pages, n)
			}
			if consumers {
				if n := consumersOf(t, r); n != 1 {
					t.Fatalf("page %d: %d consumers on the server, want 1", pages, n)
				}
			}
		}
		if events != 3*commits {
			t.Fatalf("%d events read, want %d", events, 3*commits)
		}
		t.Logf("%d pages of 7: %.1f requests a page", pages+1, float64(r.Requests()-requests)/float64(pages+1))

		// Readers at many places: at most maxCursors stay open.
		for i := range maxCursors + 4 {
			if _, err := r.ReadAll(ctxT(t), varve.AllQuery{After: varve.Position{Commit: uint64(i + 1)}, Limit: 1}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if n := r.cursors.open(); n != maxCursors {
			t.Fatalf("%d open cursors, want %d", n, maxCursors)
		}
		if consumers {
			waitFor(t, "consumers of evicted cursors deleted", func() bool { return consumersOf(t, r) <= maxCursors })
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if n := r.cursors.open(); n != 0 {
			t.Fatalf("%d open cursors after Close", n)
		}
		waitFor(t, "no consumer after Close", func() bool { return consumersOf(t, w) == 0 })

		// An idle cursor is released.
		r2 := m.attach(t, cfg)
		r2.cursors.idle = 50 * time.Millisecond
		if _, err := r2.ReadAll(ctxT(t), varve.AllQuery{Limit: 7}, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the idle cursor released", func() bool { return r2.cursors.open() == 0 })
		waitFor(t, "its consumer deleted", func() bool { return consumersOf(t, w) == 0 })
	})
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadAllPastPurgedChunks: a reader of $all that holds a chunked
// commit between pages, which a delete then purges with its chunks, reads
// on past it instead of failing on the missing chunks (the events of a
// stream deleted during a read may or may not appear).
func TestReadAllPastPurgedChunks(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("allpurge"))
		b := m.open(t, cfg)
		ctx := ctxT(t)
		big := varve.AppendRequest{Stream: "big-1", Expected: varve.NoStream, Events: makeEvents(2, 900<<10)} // above max_payload
		if _, err := b.Append(ctx, big); err != nil {
			t.Fatal(err)
		}
		if h, _ := b.streams.head("big-1"); h.st.kind != kindChunked {
			t.Fatalf("head kind %d, want a chunked commit", h.st.kind)
		}
		if _, err := b.Append(ctx, varve.AppendRequest{Stream: "small-1", Expected: varve.NoStream, Events: makeEvents(1, 10)}); err != nil {
			t.Fatal(err)
		}
		first, err := b.ReadAll(ctx, varve.AllQuery{After: varve.Start, Limit: 1}, nil)
		if err != nil || len(first) != 1 || first[0].Stream != "big-1" {
			t.Fatalf("first page: %d events, %v", len(first), err)
		}
		if err := b.Delete(ctx, "big-1", varve.Any, false); err != nil {
			t.Fatal(err)
		}
		rest, err := b.ReadAll(ctx, varve.AllQuery{After: first[0].Position, Limit: 10}, nil)
		if err != nil {
			t.Fatalf("page after the purge: %v", err)
		}
		if len(rest) != 1 || rest[0].Stream != "small-1" {
			t.Fatalf("page after the purge: %d events, want small-1's alone", len(rest))
		}
	})
}
