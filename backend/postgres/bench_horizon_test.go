package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
)

// BenchmarkWriterLock: what the writer lock costs an append. Two schemas
// in one run, one as New makes it and one whose writer_lock column has no
// default (its fast append then takes no lock, as before the writer lock);
// each loop appends
// to both, alternately, so the noise of the machine falls on both alike.
// It reports the time of each and their ratio locked/unlocked (above 1 is
// slower), for one writer and for 16 writers to streams of their own.
func BenchmarkWriterLock(b *testing.B) {
	locked := open(b, config(b, testSchema+"_wl_on"))
	cfg := config(b, testSchema+"_wl_off")
	unlocked := open(b, cfg)
	if _, err := unlocked.Pool().Exec(context.Background(), "ALTER TABLE "+unlocked.Schema()+".streams ALTER COLUMN writer_lock DROP DEFAULT"); err != nil {
		b.Fatal(err)
	}
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			var on, off pair // base: without the lock, varve: with it
			var wg sync.WaitGroup
			per := b.N/writers + 1
			for w := range writers {
				wg.Go(func() {
					stream := fmt.Sprintf("wl-%d-%d", benchRun.Add(1), w)
					var vOn, vOff varve.Version
					ev := []varve.Event{{Type: "E", Data: []byte(`{"amount":42}`)}}
					appendTo := func(be *postgres.Backend, v *varve.Version) {
						ev[0].ID = varve.NewEventID()
						res, err := be.Append(context.Background(), varve.AppendRequest{Stream: stream, Expected: varve.ExpectedVersion(*v), Events: ev})
						if err != nil {
							b.Error(err)
							return
						}
						*v = res.LastVersion
					}
					for i := range per {
						// Alternate which goes first, so that neither always
						// follows the other's commit.
						if i%2 == 0 {
							off.timeBase(func() { appendTo(unlocked, &vOff) })
							on.timeVarve(func() { appendTo(locked, &vOn) })
						} else {
							on.timeVarve(func() { appendTo(locked, &vOn) })
							off.timeBase(func() { appendTo(unlocked, &vOff) })
						}
					}
				})
			}
			wg.Wait()
			n := float64(on.ops.Load())
			b.ReportMetric(float64(off.base.Load())/n, "unlocked-ns/op")
			b.ReportMetric(float64(on.varve.Load())/n, "locked-ns/op")
			b.ReportMetric(float64(on.varve.Load())/float64(off.base.Load()), "locked/unlocked")
		})
	}
}

// BenchmarkHorizon: what the writers' horizon costs a reader. One backend
// reads pages of $all with it, another on the same schema with the xmin
// of the whole server (the reader before the writer lock), alternately; with
// no appends running ("idle") and while four goroutines append (the lock
// table is read only when some transaction runs). It reports the time of
// each page and their ratio writers/xmin.
func BenchmarkHorizon(b *testing.B) {
	cfg := config(b, testSchema+"_horizon")
	reader := open(b, cfg)
	old := open(b, cfg)
	postgres.UseXminHorizon(old)
	s, err := varve.New(reader, varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	evs := benchEvents(100)
	for i := range 100 {
		freshIDs(evs)
		if _, err := s.Append(ctx, fmt.Sprintf("horizon-%d-%d", benchRun.Add(1), i%10), varve.Any, evs...); err != nil {
			b.Fatal(err)
		}
	}
	for _, load := range []string{"idle", "appending"} {
		for _, page := range []int{512, 7} {
			b.Run(fmt.Sprintf("%s/page=%d", load, page), func(b *testing.B) {
				bg, stop := context.WithCancel(ctx)
				var wg sync.WaitGroup
				if load == "appending" {
					for w := range 4 {
						wg.Go(func() {
							stream := fmt.Sprintf("horizon-bg-%d-%d", benchRun.Add(1), w)
							for bg.Err() == nil {
								_, err := s.Append(bg, stream, varve.Any, varve.Event{Type: "E"})
								if err != nil && bg.Err() == nil {
									b.Error(err)
									return
								}
							}
						})
					}
				}
				var p pair // base: the xmin horizon, varve: the writers' one
				var afterNew, afterOld varve.Position
				buf := make([]varve.RecordedEvent, 0, page)
				read := func(be *postgres.Backend, after *varve.Position) {
					var err error
					buf, err = be.ReadAll(ctx, varve.AllQuery{After: *after, Limit: page}, buf[:0])
					if err != nil {
						b.Fatal(err)
					}
					if len(buf) < page {
						*after = varve.Start
					} else {
						*after = buf[len(buf)-1].Position
					}
				}
				for b.Loop() {
					p.timeBase(func() { read(old, &afterOld) })
					p.timeVarve(func() { read(reader, &afterNew) })
				}
				stop()
				wg.Wait()
				n := float64(p.ops.Load())
				b.ReportMetric(float64(p.base.Load())/n, "xmin-ns/op")
				b.ReportMetric(float64(p.varve.Load())/n, "writers-ns/op")
				b.ReportMetric(float64(p.varve.Load())/float64(p.base.Load()), "writers/xmin")
			})
		}
	}
}

// BenchmarkAppendBesideReader: what a reader's horizon costs the writers
// beside it (the lock table is read under all of its partition locks).
// Eight writers append while one reader follows $all in pages of 7 as fast
// as it can, switching every 50ms between the writers' horizon and the xmin
// of the whole server; each append counts for the horizon in use when it
// began. It reports the mean append time under each and their ratio.
func BenchmarkAppendBesideReader(b *testing.B) {
	cfg := config(b, testSchema+"_beside")
	cfg.MaxConns = 16
	be := open(b, cfg)
	old := open(b, cfg)
	postgres.UseXminHorizon(old)
	ctx := context.Background()
	var mode atomic.Int32 // 0: the writers' horizon, 1: xmin
	bg, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { // the reader
		readers := []*postgres.Backend{be, old}
		var after [2]varve.Position
		buf := make([]varve.RecordedEvent, 0, 7)
		for bg.Err() == nil {
			m := mode.Load()
			page, err := readers[m].ReadAll(bg, varve.AllQuery{After: after[m], Limit: 7}, buf[:0])
			if err != nil {
				if bg.Err() == nil {
					b.Error(err)
				}
				return
			}
			if len(page) > 0 {
				after[m] = page[len(page)-1].Position
			}
		}
	})
	wg.Go(func() { // the switch
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-t.C:
				mode.Store(1 - mode.Load())
			}
		}
	})
	var took, ops [2]atomic.Int64
	b.ResetTimer()
	var writers sync.WaitGroup
	const n = 8
	for w := range n {
		writers.Go(func() {
			stream := fmt.Sprintf("beside-%d-%d", benchRun.Add(1), w)
			var v varve.Version
			for range b.N/n + 1 {
				m := mode.Load()
				start := time.Now()
				res, err := be.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.ExpectedVersion(v),
					Events: []varve.Event{{ID: varve.NewEventID(), Type: "E"}}})
				if err != nil {
					b.Error(err)
					return
				}
				took[m].Add(int64(time.Since(start)))
				ops[m].Add(1)
				v = res.LastVersion
			}
		})
	}
	writers.Wait()
	b.StopTimer()
	stop()
	wg.Wait()
	if ops[0].Load() == 0 || ops[1].Load() == 0 {
		return // too short a run for both horizons; the next is longer
	}
	writersNs := float64(took[0].Load()) / float64(ops[0].Load())
	xminNs := float64(took[1].Load()) / float64(ops[1].Load())
	b.ReportMetric(writersNs, "append-ns-writers")
	b.ReportMetric(xminNs, "append-ns-xmin")
	b.ReportMetric(writersNs/xminNs, "writers/xmin")
}
