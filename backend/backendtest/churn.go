package backendtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// ChurnEventsEnv names the environment variable that sets how many events
// the writers of the Churn behaviour append to the streams that are never
// truncated or deleted (default 20,000), for a longer run.
const ChurnEventsEnv = "VARVE_CHURN_EVENTS"

const (
	churnDefaultEvents = 20_000
	churnWriters       = 12
	churnKeptStreams   = 48
	churnHotStreams    = 3
	churnChurners      = 3
	churnOwnStreams    = 3 // per churner
	churnReopenEvery   = 20
	churnEvery         = 25                    // kept events written per churn operation
	churnPause         = 20 * time.Millisecond // between a churner's operations once the writers are done
	// churnWait bounds how long after the last acknowledged append a reader
	// may take to read it. Other clients of a shared server (open
	// transactions on PostgreSQL) may hold the global log back for a while,
	// and on a busy machine a reader of one-event pages takes minutes (the
	// SQLite :memory: filtered reader was still behind after 2 minutes
	// beside a CPU hog, having missed nothing).
	churnWait = 6 * time.Minute
)

// testChurn holds $all to its promise while streams come and go: writers
// append to many streams (a few hot ones with conflicts and retries) while
// churners truncate, delete, tombstone and re-create streams of their own,
// and readers of each style follow $all: tiny pages, a reader that reopens
// a new store from the text form of its position every 20 pages, a live
// subscription, and a reader of filtered pages. The churners go on until the readers have read the last
// acknowledged append, so that a reader that is behind still reads under
// churn. Each reader must see every acknowledged event of the kept streams
// exactly once, in version order; churned events may vanish but never come
// twice or out of order. A last reader then reads the whole run afresh,
// which tells a reader that skipped events from a store that lost them.
func testChurn(t *testing.T, f Factory) {
	want := churnEvents(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	s := store(t, f)
	pfx := prefix(t)
	start, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	led := newLedger()
	probe := pfx + "probe"
	evs := events("Probe", 1)
	res, err := s.Append(ctx, probe, varve.NoStream, evs...)
	if err != nil {
		t.Fatal(err)
	}
	if err := led.keep(probe, evs, res); err != nil {
		t.Fatal(err)
	}
	open := func() (*varve.Store, error) {
		b, err := reopen(t, f, s, probe)
		if err != nil {
			return nil, err
		}
		return varve.New(b, varve.Config{})
	}
	if st, err := open(); err != nil {
		t.Fatal(err)
	} else {
		_ = st.Close()
	}

	g := &goal{set: make(chan struct{})}
	rctx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	readers := []*churnReader{
		{name: "tiny-pages", read: func(ctx context.Context, r *churnReader) error { return readTiny(ctx, s, pfx, g, r) }},
		{name: "reopening", read: func(ctx context.Context, r *churnReader) error { return readReopening(ctx, open, pfx, g, r) }},
		{name: "subscription", read: func(ctx context.Context, r *churnReader) error { return readLive(ctx, s, pfx, g, r) }},
		{name: "filtered", read: func(ctx context.Context, r *churnReader) error { return readFilteredPages(ctx, s, pfx, g, r) }},
	}
	for _, r := range readers {
		r.start(rctx, start)
	}

	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		stopWriters()
	}
	var stats churnStats
	churnStop := make(chan struct{})
	var churners sync.WaitGroup
	for c := range churnChurners {
		churners.Go(func() {
			if err := churn(wctx, s, fmt.Sprintf("%schurn-%d-", pfx, c), led, churnStop, &stats); err != nil {
				fail("churner %d: %v", c, err)
			}
		})
	}
	began := time.Now()
	var budget atomic.Int64
	budget.Store(int64(want))
	var writers sync.WaitGroup
	for w := range churnWriters {
		writers.Go(func() {
			if err := write(wctx, s, pfx, w, led, &budget, &stats); err != nil {
				fail("writer %d: %v", w, err)
			}
		})
	}
	writers.Wait()
	stats.writersDone.Store(true)
	wrote := time.Since(began)
	stopChurners := sync.OnceFunc(func() {
		close(churnStop)
		churners.Wait()
	})
	defer stopChurners()
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
	goalSet := time.Now()
	close(g.set)
	timedOut := waitReaders(readers, stopReaders)
	// The fresh scan reads once the churners are done, to tell a reader
	// that skipped events from a store that lost them.
	stopChurners()
	fresh := &churnReader{name: "fresh-scan", read: func(ctx context.Context, r *churnReader) error { return readFresh(ctx, s, pfx, g, r) }}
	if !timedOut {
		fresh.start(rctx, start)
		timedOut = waitReaders([]*churnReader{fresh}, stopReaders)
		readers = append(readers, fresh)
	}
	t.Logf("%d events acknowledged to %d kept streams in %s (%d conflicts on hot streams retried); "+
		"churners appended %d events and made %d truncations, %d deletions, %d tombstones",
		kept, len(led.kept), wrote.Round(time.Millisecond), stats.conflicts.Load(),
		stats.churned.Load(), stats.truncates.Load(), stats.deletes.Load(), stats.tombstones.Load())
	if kept < want {
		t.Errorf("only %d kept events acknowledged, want at least %d", kept, want)
	}
	// The fresh scan, when it missed nothing, shows where the others did.
	var ref []seenEvent
	if fresh.finished && fresh.reached && led.judge(fresh.name, fresh.seen, nil) == nil {
		ref = fresh.seen
	}
	for _, r := range readers {
		switch {
		case !r.finished:
			t.Errorf("reader %s stopped without a word (the factory failed in its goroutine?)", r.name)
		case timedOut && !r.reached:
			events, appends := led.behind(r.pos)
			t.Errorf("reader %s is behind: at %s after %s, the last acknowledged append is at %s; %d acknowledged events in %d appends after its position (%v)",
				r.name, r.pos, time.Since(goalSet).Round(time.Millisecond), g.through, events, appends, r.err)
		case r.err != nil:
			t.Errorf("reader %s: %v", r.name, r.err)
		default:
			t.Logf("reader %s read %d pages (%d reopens), %d events of the test, and reached the last append %s after the writers ended",
				r.name, r.pages, r.reopens, len(r.seen), r.at.Sub(goalSet).Round(time.Millisecond))
		}
		if r.finished {
			if err := led.judge(r.name, r.seen, ref); err != nil {
				t.Error(err)
			}
		}
	}
}

// waitReaders waits up to churnWait for the readers to end; then it stops
// them, waits for them and reports that it timed out.
func waitReaders(readers []*churnReader, stop func()) (timedOut bool) {
	timeout := time.NewTimer(churnWait)
	defer timeout.Stop()
	for _, r := range readers {
		select {
		case <-r.done:
		case <-timeout.C:
			timedOut = true
			stop()
			<-r.done
		}
	}
	return timedOut
}

func churnEvents(t *testing.T) int {
	v := os.Getenv(ChurnEventsEnv)
	if v == "" {
		return churnDefaultEvents
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number of events", ChurnEventsEnv, v)
	}
	return n
}

type churnStats struct {
	written                                            atomic.Int64 // kept events acknowledged
	writersDone                                        atomic.Bool
	conflicts, churned, truncates, deletes, tombstones atomic.Int64
}

// write appends batches of 1 to 100 events to the kept streams, and small
// ones to the hot streams at the version it last knew, retrying on conflict,
// until the budget of events is spent.
func write(ctx context.Context, s *varve.Store, pfx string, w int, led *ledger, budget *atomic.Int64, stats *churnStats) error {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	known := map[string]varve.Version{} // hot stream -> the version this writer last saw
	for budget.Load() > 0 {
		if ctx.Err() != nil {
			return nil
		}
		if rng.IntN(10) < 3 {
			stream := fmt.Sprintf("%shot-%d", pfx, rng.IntN(churnHotStreams))
			n := 1 + rng.IntN(5)
			for try := 0; ; try++ {
				if try == 1000 {
					return fmt.Errorf("%s: 1000 conflicts in a row", stream)
				}
				evs := events("Hot", n)
				res, err := s.Append(ctx, stream, varve.Exact(known[stream]), evs...)
				var wrong *varve.WrongExpectedVersionError
				if errors.As(err, &wrong) {
					led.refuse(evs)
					stats.conflicts.Add(1)
					known[stream] = wrong.Actual
					continue
				}
				if err != nil {
					return ignoreEnd(ctx, err)
				}
				known[stream] = res.LastVersion
				budget.Add(-int64(n))
				stats.written.Add(int64(n))
				if err := led.keep(stream, evs, res); err != nil {
					return err
				}
				break
			}
			continue
		}
		stream := fmt.Sprintf("%ss-%d", pfx, rng.IntN(churnKeptStreams))
		n := 1 + rng.IntN(100)
		if rng.IntN(2) == 0 {
			n = 1 + rng.IntN(5)
		}
		evs := events("Kept", n)
		res, err := s.Append(ctx, stream, varve.Any, evs...)
		if err != nil {
			return ignoreEnd(ctx, err)
		}
		budget.Add(-int64(n))
		stats.written.Add(int64(n))
		if err := led.keep(stream, evs, res); err != nil {
			return err
		}
	}
	return nil
}

// ignoreEnd drops the error of a call that failed because another goroutine
// failed first and ended ctx.
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// churn appends to streams of its own and truncates, deletes and tombstones
// them until stop is closed. A tombstoned stream is replaced by a new one.
func churn(ctx context.Context, s *varve.Store, base string, led *ledger, stop <-chan struct{}, stats *churnStats) error {
	rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(time.Now().UnixNano())))
	type life struct {
		name    string
		gen     int // deletions so far
		version varve.Version
		exists  bool
	}
	var streams [churnOwnStreams]life
	for k := range streams {
		streams[k].name = fmt.Sprintf("%s%d", base, k)
	}
	tombs, ops := 0, int64(0)
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		// While the writers write, a churner makes an operation per
		// churnEvery kept events written by all, so that every backend sees
		// about as much churn per event however fast it is; then one every
		// churnPause until the readers are done.
		for !stats.writersDone.Load() && ops*churnChurners*churnEvery > stats.written.Load() {
			if err := pause(ctx, churnPoll); err != nil {
				return nil
			}
		}
		if stats.writersDone.Load() {
			if err := pause(ctx, churnPause); err != nil {
				return nil
			}
		}
		ops++
		l := &streams[rng.IntN(len(streams))]
		op := rng.IntN(20)
		switch {
		case op < 12 || !l.exists:
			evs := events("Churned", 1+rng.IntN(20))
			res, err := s.Append(ctx, l.name, varve.Any, evs...)
			if err != nil {
				return ignoreEnd(ctx, fmt.Errorf("append: %w", err))
			}
			led.churn(l.name, l.gen, evs, res)
			l.version, l.exists = res.LastVersion, true
			stats.churned.Add(int64(len(evs)))
		case op < 15:
			before := varve.Version(1 + rng.IntN(int(l.version)+1))
			if err := s.Truncate(ctx, l.name, before); err != nil {
				return ignoreEnd(ctx, fmt.Errorf("truncate: %w", err))
			}
			stats.truncates.Add(1)
		case op < 18:
			if err := s.Delete(ctx, l.name, varve.Any); err != nil {
				return ignoreEnd(ctx, fmt.Errorf("delete: %w", err))
			}
			l.gen, l.exists = l.gen+1, false
			stats.deletes.Add(1)
		default:
			if err := s.Tombstone(ctx, l.name, varve.Any); err != nil {
				return ignoreEnd(ctx, fmt.Errorf("tombstone: %w", err))
			}
			tombs++
			*l = life{name: fmt.Sprintf("%st%d", base, tombs)}
			stats.tombstones.Add(1)
		}
	}
}
