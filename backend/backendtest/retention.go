package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/retention"
)

const (
	retentionEvents  = 2000 // events the racing writers append
	retentionWriters = 4
	retentionRacing  = 4 // streams the policies truncate while they are written
	retentionKept    = 4 // streams of the category exempt from its policy
	retentionCount   = 3 // the MaxCount of the racing streams
	retentionPasses  = 3 // passes that removed events while the writers wrote
	retentionAge     = time.Hour
)

// testRetention holds the scavenger of package retention to its policies
// on the backend, and $all to its promise while the scavenger truncates.
// First, one pass at a time with an injected clock: policies by count, by
// version, by age (the cut computed from the times the backend recorded),
// with and without AllowEmpty, and a category's policy, which spares the
// streams with a policy of their own; each stream keeps exactly what its
// policy says and its version. Then two scavengers sharing a lease run in
// a loop while writers append to streams that policies shrink and to
// streams that nothing may shrink, and readers follow $all (tiny pages,
// filtered pages, a live subscription): at most one pass runs at a time
// where the backend keeps leases, the writers go on until passes have
// removed events under them, every reader sees each event of the spared
// streams exactly once and no event twice or out of order, and a last pass
// leaves each shrunk stream with its last events at their versions.
func testRetention(t *testing.T, f Factory) {
	s := store(t, f)
	ctx := ctxFor(t)
	// A category of the test's own: the prefix without the separator.
	var b [4]byte
	_, _ = rand.Read(b[:])
	cat := "btretention" + hex.EncodeToString(b[:])
	pfx := cat + s.Config().CategorySeparator
	lease := "bt-retention-" + hex.EncodeToString(b[:])
	listing := !lacks(t, f, s, varve.Capabilities{ListStreams: true})
	var targets []retention.Target
	set := func(target retention.Target, p retention.Policy) {
		t.Helper()
		if err := retention.Set(ctx, s, target, p); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target)
	}
	t.Cleanup(func() {
		for _, target := range targets {
			_ = retention.Remove(context.Background(), s, target)
		}
	})
	write := func(stream string, n int) []varve.RecordedEvent {
		t.Helper()
		for range n {
			mustAppend(t, s, stream, varve.Any, events("R", 1)...)
		}
		return mustRead(t, s, stream)
	}
	kept := func(stream string) (first, last varve.Version) {
		t.Helper()
		evs, err := collect(s.ReadStream(ctx, stream))
		if err != nil {
			t.Fatalf("read %s: %v", stream, err)
		}
		if len(evs) == 0 {
			return 0, 0
		}
		for i := range evs {
			if i > 0 && evs[i].Version != evs[i-1].Version+1 {
				t.Fatalf("%s: version %d after %d", stream, evs[i].Version, evs[i-1].Version)
			}
		}
		return evs[0].Version, evs[len(evs)-1].Version
	}
	type want struct {
		stream      string
		first, last varve.Version
	}
	check := func(what string, wants []want) {
		t.Helper()
		for _, w := range wants {
			first, last := kept(w.stream)
			if first != w.first || last != w.last {
				t.Errorf("%s: %s keeps %d..%d, want %d..%d", what, w.stream, first, last, w.first, w.last)
			}
			if info, err := s.StreamInfo(ctx, w.stream); err != nil || info.Version < w.last || w.last == 0 && info.Version == 0 {
				t.Errorf("%s: %s is at version %d (%v)", what, w.stream, info.Version, err)
			}
		}
	}

	// One pass at a time, with a clock of the test's choosing.
	count, before, aged, emptied := pfx+"count", pfx+"before", pfx+"aged", pfx+"emptied"
	write(count, 10)
	write(before, 10)
	emptiedEvents := write(emptied, 4)
	agedEvents := write(aged, 10)
	set(retention.Target{Stream: count}, retention.Policy{MaxCount: 3})
	set(retention.Target{Stream: before}, retention.Policy{TruncateBefore: 4})
	set(retention.Target{Stream: aged}, retention.Policy{MaxAge: retentionAge})
	set(retention.Target{Stream: emptied}, retention.Policy{MaxAge: retentionAge, AllowEmpty: true})
	// The clock makes the events of aged from its 6th on not older than
	// MaxAge (from an earlier one recorded at the same time, if any), and
	// all of emptied's, written before, older: the cut is at the first of
	// aged's events from the 6th on recorded after emptied's last.
	emptiedLast := emptiedEvents[len(emptiedEvents)-1].RecordedAt
	for len(agedEvents) < 1000 && !agedEvents[len(agedEvents)-1].RecordedAt.After(emptiedLast) {
		agedEvents = write(aged, 1)
	}
	at := 5
	for !agedEvents[at].RecordedAt.After(emptiedLast) {
		at++ // the backend's clock stood still, or went back
	}
	cutAt := agedEvents[at].RecordedAt
	cut := agedEvents[at].Version
	for _, e := range agedEvents {
		if !e.RecordedAt.Before(cutAt) {
			cut = e.Version
			break
		}
	}
	agedLast := agedEvents[len(agedEvents)-1].Version
	wants := []want{{count, 8, 10}, {before, 4, 10}, {aged, cut, agedLast}, {emptied, 0, 0}}
	if listing {
		for _, st := range []string{"c1", "c2"} {
			write(pfx+st, 5)
		}
		write(cat, 4) // the stream named as the category is in it
		set(retention.Target{Category: cat}, retention.Policy{MaxCount: 2})
		wants = append(wants, want{pfx + "c1", 4, 5}, want{pfx + "c2", 4, 5}, want{cat, 3, 4})
	}
	clock := func() time.Time { return cutAt.Add(retentionAge) }
	sc, err := retention.New(retention.Config{Store: s, Lease: lease, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sc.ScavengeOnce(ctx)
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	if rep.Errors != 0 || rep.Incomplete {
		t.Fatalf("pass: %+v", rep)
	}
	check("after a pass", wants)
	// Appends go on at the stream's version; the next pass shrinks it to
	// its policy again.
	if res := mustAppend(t, s, count, varve.Exact(10), events("R", 2)...); res.FirstVersion != 11 {
		t.Fatalf("append to %s after its truncation: %+v", count, res)
	}
	if rep, err = sc.ScavengeOnce(ctx); err != nil || rep.Errors != 0 {
		t.Fatalf("second pass: %+v, %v", rep, err)
	}
	check("after an append and a second pass", []want{{count, 10, 12}})
	if last, ok, err := retention.LastReport(ctx, s); err != nil || !ok || last.Position != rep.Position {
		t.Fatalf("last report %+v, %v, %v; the pass's is at %s", last, ok, err, rep.Position)
	}
	if listing {
		// Streams of the category with a policy of their own: these
		// are spared by the category's while the writers write.
		for k := range retentionKept {
			set(retention.Target{Stream: fmt.Sprintf("%skept-%d", pfx, k)}, retention.Policy{})
		}
	}
	for r := range retentionRacing {
		set(retention.Target{Stream: fmt.Sprintf("%sracing-%d", pfx, r)}, retention.Policy{MaxCount: retentionCount})
	}
	retentionRace(t, f, s, pfx, lease, listing)
}

// retentionRace runs scavengers in a loop beside writers and readers of
// $all; see testRetention.
func retentionRace(t *testing.T, f Factory, s *varve.Store, pfx, lease string, listing bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	led := newLedger()
	g := &goal{set: make(chan struct{})}
	rctx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	readers := []*churnReader{
		{name: "tiny-pages", read: func(ctx context.Context, r *churnReader) error { return readTiny(ctx, s, pfx, g, r) }},
		{name: "subscription", read: func(ctx context.Context, r *churnReader) error { return readLive(ctx, s, pfx, g, r) }},
		{name: "filtered", read: func(ctx context.Context, r *churnReader) error { return readFilteredPages(ctx, s, pfx, g, r) }},
	}
	for _, r := range readers {
		r.start(rctx, start)
	}

	// Two scavengers share the lease; where the backend keeps leases, at
	// most one of them is in a pass at any time.
	leases := s.Capabilities().Leases
	var (
		writing  atomic.Bool
		racing   atomic.Int64 // passes that removed events while the writers wrote
		active   atomic.Int64
		overlaps atomic.Int64
		failures sync.Map // holder -> the last error of a pass other than a held lease
	)
	writing.Store(true)
	sctx, stopScavengers := context.WithCancel(ctx)
	defer stopScavengers()
	var scavengers sync.WaitGroup
	for i := range 2 {
		holder := fmt.Sprintf("scavenger-%d", i)
		began := false
		sc, err := retention.New(retention.Config{Store: s, Lease: lease, Holder: holder, Interval: 2 * time.Millisecond, Hooks: retention.Hooks{
			Began: func() {
				began = true
				if active.Add(1) > 1 && leases {
					overlaps.Add(1)
				}
			},
			AfterPass: func(r retention.Report, err error) {
				if began {
					active.Add(-1)
					began = false
				}
				switch {
				case err != nil && !errors.Is(err, varve.ErrLeaseHeld) && sctx.Err() == nil:
					failures.Store(holder, err)
				case err == nil && r.Errors > 0:
					failures.Store(holder, fmt.Errorf("a pass failed on %d streams: %v", r.Errors, r.Problems))
				case err == nil && r.Removed > 0 && writing.Load():
					racing.Add(1)
				}
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		scavengers.Go(func() {
			if err := sc.Run(sctx); err != nil {
				t.Errorf("%s: Run: %v", holder, err)
			}
		})
	}
	stopScavenging := sync.OnceFunc(func() {
		stopScavengers()
		scavengers.Wait()
	})
	defer stopScavenging()

	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	var budget atomic.Int64
	budget.Store(retentionEvents)
	racingStreams := map[string]varve.Version{}
	var mu sync.Mutex
	var writers sync.WaitGroup
	deadline := time.Now().Add(3 * time.Minute)
	for w := range retentionWriters {
		writers.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for budget.Load() > 0 || racing.Load() < retentionPasses && time.Now().Before(deadline) {
				if wctx.Err() != nil {
					return
				}
				evs := events("Written", 1+rng.IntN(10))
				racingStream := rng.IntN(2) == 0
				stream := fmt.Sprintf("%skept-%d", pfx, rng.IntN(retentionKept))
				if racingStream {
					stream = fmt.Sprintf("%sracing-%d", pfx, rng.IntN(retentionRacing))
				}
				res, err := s.Append(wctx, stream, varve.Any, evs...)
				if err != nil {
					if wctx.Err() == nil {
						t.Errorf("writer %d: %v", w, err)
						stopWriters()
					}
					return
				}
				budget.Add(-int64(len(evs)))
				if racingStream {
					led.churn(stream, 0, evs, res)
					mu.Lock()
					racingStreams[stream] = max(racingStreams[stream], res.LastVersion)
					mu.Unlock()
				} else if err := led.keep(stream, evs, res); err != nil {
					t.Error(err)
					stopWriters()
					return
				}
			}
		})
	}
	writers.Wait()
	writing.Store(false)
	stopScavenging()
	if n := racing.Load(); n < retentionPasses && !t.Failed() {
		t.Errorf("only %d passes removed events while the writers wrote, in 3 minutes; want %d", n, retentionPasses)
	}
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d passes began while another scavenger holding the same lease was in one", n)
	}
	failures.Range(func(holder, err any) bool {
		t.Errorf("%s: %v", holder, err)
		return true
	})
	kept, err := led.complete()
	if err != nil {
		t.Error(err)
	}
	if t.Failed() {
		stopReaders()
		for _, r := range readers {
			<-r.done
		}
		return
	}
	g.through = led.through
	close(g.set)
	timedOut := waitReaders(readers, stopReaders)
	fresh := &churnReader{name: "fresh-scan", read: func(ctx context.Context, r *churnReader) error { return readFresh(ctx, s, pfx, g, r) }}
	if !timedOut {
		fresh.start(rctx, start)
		timedOut = waitReaders([]*churnReader{fresh}, stopReaders)
		readers = append(readers, fresh)
	}
	var ref []seenEvent
	if fresh.finished && fresh.reached && led.judge(fresh.name, fresh.seen, nil) == nil {
		ref = fresh.seen
	}
	for _, r := range readers {
		switch {
		case !r.finished:
			t.Errorf("reader %s stopped without a word", r.name)
		case timedOut && !r.reached:
			t.Errorf("reader %s is behind: at %s, the last acknowledged append is at %s (%v)", r.name, r.pos, g.through, r.err)
		case r.err != nil:
			t.Errorf("reader %s: %v", r.name, r.err)
		}
		if r.finished {
			if err := led.judge(r.name, r.seen, ref); err != nil {
				t.Error(err)
			}
		}
	}
	t.Logf("%d events to spared streams, %d passes removed events under the writers", kept, racing.Load())

	// A last pass shrinks each racing stream to its last events, at their
	// versions. Its lease is another: a scavenger stopped in the middle of
	// an acquisition may hold theirs for its TTL.
	sc, err := retention.New(retention.Config{Store: s, Lease: lease + "-last"})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := sc.ScavengeOnce(ctx); err != nil || rep.Errors != 0 {
		t.Fatalf("last pass: %+v, %v", rep, err)
	}
	for stream, last := range racingStreams {
		evs, err := collect(s.ReadStream(ctx, stream))
		if err != nil {
			t.Fatal(err)
		}
		from := varve.Version(1)
		if last > retentionCount {
			from = last - retentionCount + 1
		}
		if got := versions(evs); !equalVersions(got, seqVersions(from, last)) {
			t.Errorf("%s keeps versions %v after the last pass, want the last %d up to %d", stream, got, retentionCount, last)
		}
	}
}
