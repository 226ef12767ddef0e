package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// TestAllUnderChurn follows $all with tiny pages (1-7 events) while writers
// append to streams of their own and churners append to, truncate, delete,
// tombstone and re-create other streams of the same JetStream stream: the
// purges of deletes and truncations moved live consumers on servers before
// 2.11, and readers skipped events. Every acknowledged event of the
// writers' streams must reach every reader exactly once, in order; events
// of churned streams may vanish but never come twice or out of order.
// Half the readers read filtered on both categories of the test's streams
// (varve.FilteredReader, one cursor per category, merged).
func TestAllUnderChurn(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		cfg := testConfig(m.url, uniqueName("churn"))
		w := m.open(t, cfg)
		res := runChurn(t, m, cfg, w, churnConfig{writers: 4, streams: 6, churners: 3, readers: 4, events: 8000})
		t.Logf("%d events acknowledged on the writers' streams, %d on churned streams, %d truncations, %d deletes; readers saw %v; consumers passed over %d messages, %d were replaced after lost deliveries",
			res.live, res.churned, res.truncates, res.deletes, res.seen, res.passedOver, res.restarts)
		for i, n := range res.missing {
			if n != 0 {
				t.Errorf("reader %d: %d acknowledged events never returned (%v)", i, n, res.firstMiss[i])
			}
		}
	})
}

type churnConfig struct {
	writers, streams  int // writers, each appending to streams of its own
	churners, readers int
	events            int // acknowledged events of the writers' streams to write
}

type churnResult struct {
	live, churned      int
	truncates, deletes int
	passedOver         int // messages that consumers passed over and scans read by direct get
	restarts           int // consumers replaced after lost deliveries
	seen, missing      []int
	firstMiss          []string
}

// acked is an acknowledged event of a writer's stream.
type acked struct {
	stream  string
	version varve.Version
}

func runChurn(t *testing.T, m mode, cfg Config, w *Backend, cc churnConfig) churnResult {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var (
		mu      sync.Mutex
		live    = map[uuid.UUID]acked{}
		written atomic.Int64
		stop    = make(chan struct{})
		res     churnResult
	)
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		cancel()
	}
	var writers sync.WaitGroup
	for wi := range cc.writers {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(wi), 1))
			ver := make([]varve.Version, cc.streams)
			for written.Load() < int64(cc.events) && ctx.Err() == nil {
				k := rng.IntN(cc.streams)
				stream := fmt.Sprintf("live-%d-%d", wi, k)
				evs := makeEvents(1+rng.IntN(4), 20)
				r, err := w.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Exact(ver[k]), Events: evs})
				if err != nil {
					fail("writer %d: append to %s at %d: %v", wi, stream, ver[k], err)
					return
				}
				ver[k] = r.LastVersion
				mu.Lock()
				for i := range evs {
					live[evs[i].ID] = acked{stream: stream, version: r.FirstVersion + varve.Version(i)}
				}
				mu.Unlock()
				written.Add(int64(len(evs)))
			}
		})
	}
	var churners sync.WaitGroup
	var churned, truncates, deletes atomic.Int64
	for ci := range cc.churners {
		churners.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(ci), 2))
			gen := 0
			stream := func() string { return fmt.Sprintf("churn-%d-%d", ci, gen) }
			for {
				select {
				case <-stop:
					return
				default:
				}
				if ctx.Err() != nil {
					return
				}
				var err error
				switch op := rng.IntN(10); {
				case op < 6:
					evs := makeEvents(1+rng.IntN(5), 20)
					_, err = w.Append(ctx, varve.AppendRequest{Stream: stream(), Expected: varve.Any, Events: evs})
					if err == nil {
						churned.Add(int64(len(evs)))
					}
				case op < 8:
					var info varve.StreamInfo
					info, err = w.StreamInfo(ctx, stream())
					if err == nil && !info.Deleted && info.Version > 1 {
						err = w.Truncate(ctx, stream(), 1+varve.Version(rng.Int64N(int64(info.Version))))
						truncates.Add(1)
					}
				case op < 9:
					err = w.Delete(ctx, stream(), varve.Any, false)
					deletes.Add(1)
				default:
					err = w.Delete(ctx, stream(), varve.Any, true)
					deletes.Add(1)
					gen++
				}
				if err != nil && !errors.Is(err, varve.ErrStreamNotFound) && !errors.Is(err, varve.ErrStreamDeleted) {
					fail("churner %d: %v", ci, err)
					return
				}
			}
		})
	}

	// Readers: each on a backend of its own, as another process.
	res.seen = make([]int, cc.readers)
	res.missing = make([]int, cc.readers)
	res.firstMiss = make([]string, cc.readers)
	var done atomic.Bool
	var readers sync.WaitGroup
	// seenBy[reader][id] is where the reader saw an event of a writer's
	// stream (live-*): these are checked against the acknowledged events
	// once the writers are done.
	seenBy := make([]map[uuid.UUID]acked, cc.readers)
	rs := make([]*Backend, cc.readers)
	for ri := range cc.readers {
		r := m.attach(t, cfg)
		rs[ri] = r
		seenBy[ri] = map[uuid.UUID]acked{}
		readers.Go(func() {
			last := map[string]varve.Version{} // writers' streams: last version seen
			rng := rand.New(rand.NewPCG(uint64(ri), 3))
			// Odd readers read the two categories of the test, a cursor
			// each merged by the backend, and resume after each short
			// page's Through.
			filtered := ri%2 == 1
			both := varve.Filter{Categories: []string{"churn", "live"}}
			var after varve.Position
			seenIDs := map[uuid.UUID]bool{}
			var buf []varve.RecordedEvent
			for ctx.Err() == nil {
				finished := done.Load() // all writes ended before this page
				limit := 1 + rng.IntN(7)
				var page []varve.RecordedEvent
				var through varve.Position
				var err error
				if filtered {
					page, through, err = r.ReadAllFiltered(ctx, varve.FilterQuery{After: after, Limit: limit, Filter: both}, buf[:0])
				} else {
					page, err = r.ReadAll(ctx, varve.AllQuery{After: after, Limit: limit}, buf[:0])
				}
				if err != nil {
					fail("reader %d: page after %v: %v", ri, after, err)
					return
				}
				buf = page
				for _, e := range page {
					if !after.Less(e.Position) {
						fail("reader %d: position %v after %v", ri, e.Position, after)
						return
					}
					after = e.Position
					if seenIDs[e.ID] {
						fail("reader %d: event %s (%s@%d) twice", ri, e.ID, e.Stream, e.Version)
						return
					}
					seenIDs[e.ID] = true
					if !strings.HasPrefix(e.Stream, "live-") {
						continue // a churned stream's event
					}
					if prev := last[e.Stream]; e.Version != prev+1 && res.firstMiss[ri] == "" {
						res.firstMiss[ri] = fmt.Sprintf("first: %s@%d after @%d, at %v, page of %d", e.Stream, e.Version, prev, e.Position, limit)
					}
					last[e.Stream] = e.Version
					seenBy[ri][e.ID] = acked{stream: e.Stream, version: e.Version}
				}
				if filtered && len(page) < limit {
					if through.Less(after) {
						fail("reader %d: a page of %d events after %v goes through %v, before its last event", ri, len(page), after, through)
						return
					}
					after = through
				}
				if len(page) == 0 {
					if finished {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	churners.Wait()
	done.Store(true)
	readers.Wait()

	res.live, res.churned = int(written.Load()), int(churned.Load())
	res.truncates, res.deletes = int(truncates.Load()), int(deletes.Load())
	for ri := range cc.readers {
		for id, a := range live {
			switch s, ok := seenBy[ri][id]; {
			case !ok:
				res.missing[ri]++
			case s != a:
				t.Errorf("reader %d: event %s is %s@%d, acknowledged as %s@%d", ri, id, s.stream, s.version, a.stream, a.version)
			default:
				res.seen[ri]++
			}
		}
		for id, s := range seenBy[ri] {
			if _, ok := live[id]; !ok {
				t.Errorf("reader %d: event %s (%s@%d) that no writer had acknowledged", ri, id, s.stream, s.version)
			}
		}
		res.passedOver += int(rs[ri].c.PassedOver())
		res.restarts += int(rs[ri].c.Restarts())
	}
	return res
}
