package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// The benchmarks measure varve on SQLite against a baseline run in the same
// process: a bare INSERT of a row with the same payload, one per
// transaction, into a plain table of a database with the same pragmas and
// the same driver path. Compare the events/s figures of a run; absolute
// times on a shared machine mean little.

var (
	benchData = []byte(`{"order":"4f1c2a","customer":"c-1029","lines":[{"sku":"A-17","qty":2},{"sku":"B-3","qty":1}],"total":129.5}`)
	benchMeta = []byte(`{"by":"bench","trace":"9b2e"}`)
)

func benchEvents(n int) []varve.Event {
	evs := make([]varve.Event, n)
	for i := range evs {
		evs[i] = varve.Event{Type: "OrderPlaced", Data: benchData, Metadata: benchMeta}
	}
	return evs
}

// baseline opens a database with the backend's pragmas and a plain table.
func baseline(b *testing.B, sync Synchronous) *conn {
	b.Helper()
	c, err := openConn(filepath.Join(b.TempDir(), "baseline.db"), "mode=rwc")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.close() })
	cfg, _ := Config{Path: "x", Synchronous: sync}.withDefaults()
	if err := configure(bg, c, cfg, false); err != nil {
		b.Fatal(err)
	}
	if _, err := c.exec(bg, "CREATE TABLE t (id INTEGER PRIMARY KEY, type TEXT, data BLOB, metadata BLOB)"); err != nil {
		b.Fatal(err)
	}
	return c
}

func benchStore(b *testing.B, cfg Config) (*varve.Store, *Backend) {
	b.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(b.TempDir(), "varve.db")
	}
	be, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := varve.New(be, varve.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s, be
}

// meter times the work of one side of a comparison.
type meter struct {
	d      time.Duration
	events int64
}

func (m *meter) run(b *testing.B, events int64, fn func() error) {
	start := time.Now()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	m.d += time.Since(start)
	m.events += events
}

func (m *meter) rate() float64 { return float64(m.events) / m.d.Seconds() }

// report reports each side's events/s and the ratio of the first to the
// second.
func report(b *testing.B, names []string, ms ...*meter) {
	for i, m := range ms {
		b.ReportMetric(m.rate(), names[i]+"-events/s")
	}
	b.ReportMetric(ms[0].rate()/ms[1].rate(), names[0]+"/"+names[1])
}

// The benchmarks alternate the sides of each comparison within every
// iteration, so that the noise of a shared machine (other builds, other
// disks' fsyncs) falls on both sides alike, and report the ratio.

func insertRow(c *conn) error {
	if _, err := c.exec(bg, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if _, err := c.exec(bg, "INSERT INTO t (type, data, metadata) VALUES (?1, ?2, ?3)", "OrderPlaced", benchData, benchMeta); err != nil {
		return err
	}
	_, err := c.exec(bg, "COMMIT")
	return err
}

// indexed is a table shaped like varve's events: three b-trees (position,
// stream+version, stream+event id), to tell the cost of the schema from the
// cost of the machinery.
type indexed struct {
	c *conn
	v int64
}

func newIndexed(b *testing.B, sync Synchronous) *indexed {
	c := baseline(b, sync)
	if _, err := c.exec(bg, "CREATE TABLE e (pos INTEGER PRIMARY KEY, stream INTEGER, version INTEGER, id BLOB, type TEXT, data BLOB, metadata BLOB, at INTEGER, UNIQUE (stream, version), UNIQUE (stream, id))"); err != nil {
		b.Fatal(err)
	}
	return &indexed{c: c}
}

func (x *indexed) insert() error {
	if _, err := x.c.exec(bg, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	x.v++
	id := varve.NewEventID()
	if _, err := x.c.exec(bg, "INSERT INTO e (pos, stream, version, id, type, data, metadata, at) VALUES (?1, 1, ?1, ?2, ?3, ?4, ?5, ?6)",
		x.v, id[:], "OrderPlaced", benchData, benchMeta, time.Now().UnixNano()); err != nil {
		return err
	}
	_, err := x.c.exec(bg, "COMMIT")
	return err
}

func BenchmarkAppend(b *testing.B) {
	for _, mode := range []Synchronous{SyncFull, SyncNormal} {
		// One goroutine, one event per append, against a bare INSERT per
		// transaction and the same INSERT into an events-shaped table.
		b.Run("sync="+mode.String()+"/single", func(b *testing.B) {
			base, idx := baseline(b, mode), newIndexed(b, mode)
			s, _ := benchStore(b, Config{Synchronous: mode})
			var mv, mb, mi meter
			for b.Loop() {
				mb.run(b, 1, func() error { return insertRow(base) })
				mi.run(b, 1, idx.insert)
				mv.run(b, 1, func() error {
					_, err := s.Append(bg, "order", varve.Any, benchEvents(1)...)
					return err
				})
			}
			report(b, []string{"varve", "insert", "indexed"}, &mv, &mb, &mi)
			b.ReportMetric(mi.rate()/mb.rate(), "indexed/insert")
		})
		// Single-event appends from 8 goroutines against 1 goroutine, on
		// one backend: the speed-up is group commit's.
		b.Run("sync="+mode.String()+"/concurrent", func(b *testing.B) {
			s, be := benchStore(b, Config{Synchronous: mode})
			const g, each = 8, 8
			var m8, m1 meter
			var commits8 uint64
			for b.Loop() {
				start := be.Stats()
				m8.run(b, g*each, func() error {
					var wg sync.WaitGroup
					errs := make(chan error, g)
					for w := range g {
						wg.Go(func() {
							for range each {
								if _, err := s.Append(bg, fmt.Sprintf("order-%d", w), varve.Any, benchEvents(1)...); err != nil {
									errs <- err
									return
								}
							}
						})
					}
					wg.Wait()
					close(errs)
					return <-errs
				})
				before := be.Stats()
				commits8 += before.Commits - start.Commits
				m1.run(b, each, func() error {
					for range each {
						if _, err := s.Append(bg, "order-0", varve.Any, benchEvents(1)...); err != nil {
							return err
						}
					}
					return nil
				})
				after := be.Stats()
				if after.Commits-before.Commits != each {
					b.Fatalf("a lone writer's %d appends took %d commits", each, after.Commits-before.Commits)
				}
			}
			report(b, []string{"g8", "g1"}, &m8, &m1)
			b.ReportMetric(float64(m8.events)/float64(commits8), "g8-appends/commit")
		})
		// Appends of 100 events against 100 bare INSERTs in one transaction.
		b.Run("sync="+mode.String()+"/batch100", func(b *testing.B) {
			base := baseline(b, mode)
			s, _ := benchStore(b, Config{Synchronous: mode})
			var mv, mb meter
			for b.Loop() {
				mb.run(b, 100, func() error {
					if _, err := base.exec(bg, "BEGIN IMMEDIATE"); err != nil {
						return err
					}
					for range 100 {
						if _, err := base.exec(bg, "INSERT INTO t (type, data, metadata) VALUES (?1, ?2, ?3)", "OrderPlaced", benchData, benchMeta); err != nil {
							return err
						}
					}
					_, err := base.exec(bg, "COMMIT")
					return err
				})
				mv.run(b, 100, func() error {
					_, err := s.Append(bg, "orders", varve.Any, benchEvents(100)...)
					return err
				})
			}
			report(b, []string{"varve", "insert"}, &mv, &mb)
		})
	}
}

// BenchmarkReadStream loads a 1,000-event stream (and the same 1,000 events
// through $all) against a bare SELECT of 1,000 rows of the same payload.
func BenchmarkReadStream(b *testing.B) {
	const n = 1000
	base := baseline(b, SyncNormal)
	if _, err := base.exec(bg, "BEGIN"); err != nil {
		b.Fatal(err)
	}
	for range n {
		if _, err := base.exec(bg, "INSERT INTO t (type, data, metadata) VALUES (?1, ?2, ?3)", "OrderPlaced", benchData, benchMeta); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := base.exec(bg, "COMMIT"); err != nil {
		b.Fatal(err)
	}
	s, _ := benchStore(b, Config{Synchronous: SyncNormal})
	if _, err := s.Append(bg, "long", varve.NoStream, benchEvents(n)...); err != nil {
		b.Fatal(err)
	}
	count := func(seq func(func(varve.RecordedEvent, error) bool)) error {
		rows := 0
		for _, err := range seq {
			if err != nil {
				return err
			}
			rows++
		}
		if rows != n {
			return fmt.Errorf("%d events", rows)
		}
		return nil
	}
	var mb, ms, ma meter
	for b.Loop() {
		mb.run(b, n, func() error {
			rows := 0
			err := base.query(bg, "SELECT id, type, data, metadata FROM t ORDER BY id", func(v []driver.Value) error {
				rows++
				return nil
			})
			if err == nil && rows != n {
				err = fmt.Errorf("%d rows", rows)
			}
			return err
		})
		ms.run(b, n, func() error { return count(s.ReadStream(bg, "long")) })
		ma.run(b, n, func() error { return count(s.ReadAll(bg, varve.Start)) })
	}
	report(b, []string{"stream", "select", "all"}, &ms, &mb, &ma)
	b.ReportMetric(ma.rate()/mb.rate(), "all/select")
}

// BenchmarkFilterIndexCost measures what the indexes of filtered reads
// (migration 2) cost an append: single-event appends alternate between a
// store with them and one whose indexes were dropped, with the sync mode
// of the default (FULL) and of NORMAL.
func BenchmarkFilterIndexCost(b *testing.B) {
	for _, sync := range []Synchronous{SyncFull, SyncNormal} {
		b.Run("sync="+sync.pragma(), func(b *testing.B) {
			with, _ := benchStore(b, Config{Synchronous: sync})
			without, be := benchStore(b, Config{Synchronous: sync})
			if _, err := be.wconn.exec(bg, "DROP INDEX events_category"); err != nil {
				b.Fatal(err)
			}
			if _, err := be.wconn.exec(bg, "DROP INDEX events_type"); err != nil {
				b.Fatal(err)
			}
			evs := benchEvents(1)
			var mWith, mWithout meter
			i := 0
			appendTo := func(s *varve.Store) func() error {
				return func() error {
					evs[0].ID = varve.NewEventID()
					_, err := s.Append(bg, fmt.Sprintf("order-%d", i%1000), varve.Any, evs...)
					return err
				}
			}
			for b.Loop() {
				i++
				mWith.run(b, 1, appendTo(with))
				mWithout.run(b, 1, appendTo(without))
			}
			report(b, []string{"indexed", "unindexed"}, &mWith, &mWithout)
		})
	}
}

// BenchmarkSecureDeleteCost measures what PRAGMA secure_delete would cost
// appends and truncations if it were set for the writer connection rather
// than around the statements that delete or rewrap a key: stores with it
// FAST and ON alternate with one with it OFF (the default), on single-event
// appends and on truncations of 100-event streams (the appends of which
// are not timed).
func BenchmarkSecureDeleteCost(b *testing.B) {
	for _, sync := range []Synchronous{SyncFull, SyncNormal} {
		for _, work := range []string{"append", "truncate"} {
			b.Run("sync="+sync.pragma()+"/"+work, func(b *testing.B) {
				names := []string{"off", "fast", "on"}
				stores := make([]*varve.Store, len(names))
				for i, mode := range names {
					s, be := benchStore(b, Config{Synchronous: sync})
					if _, err := be.wconn.exec(bg, "PRAGMA secure_delete = "+mode); err != nil {
						b.Fatal(err)
					}
					stores[i] = s
				}
				ms := make([]meter, len(names))
				evs, long := benchEvents(1), benchEvents(100)
				i := 0
				for b.Loop() {
					i++
					stream := fmt.Sprintf("order-%d", i)
					for j, s := range stores {
						if work == "append" {
							ms[j].run(b, 1, func() error {
								evs[0].ID = varve.NewEventID()
								_, err := s.Append(bg, stream, varve.Any, evs...)
								return err
							})
							continue
						}
						for k := range long {
							long[k].ID = varve.NewEventID()
						}
						if _, err := s.Append(bg, stream, varve.NoStream, long...); err != nil {
							b.Fatal(err)
						}
						ms[j].run(b, 100, func() error { return s.Truncate(bg, stream, 101) })
					}
				}
				report(b, []string{"fast", "off"}, &ms[1], &ms[0])
				b.ReportMetric(ms[2].rate(), "on-events/s")
				b.ReportMetric(ms[2].rate()/ms[0].rate(), "on/off")
			})
		}
	}
}

// BenchmarkDeleteKey measures a key's deletion (secure_delete around the
// statement, then the WAL checkpointed and truncated) against a checkpoint
// save, a write of one small row, on the same store; the puts of the keys
// are not timed.
func BenchmarkDeleteKey(b *testing.B) {
	s, _ := benchStore(b, Config{})
	keys := s.Keys()
	wrapped := make([]byte, 60)
	var md, mc meter
	i := 0
	for b.Loop() {
		i++
		subject := fmt.Sprintf("subject-%d", i)
		k, err := keys.Put(bg, varve.WrappedKey{Subject: subject, ID: varve.NewEventID(), Master: "m1", Wrapped: wrapped})
		if err != nil {
			b.Fatal(err)
		}
		md.run(b, 1, func() error {
			ok, err := keys.Delete(bg, subject, k.ID)
			if err == nil && !ok {
				err = fmt.Errorf("%s was not deleted", subject)
			}
			return err
		})
		mc.run(b, 1, func() error { return s.Checkpoints().Save(bg, "bench", varve.Position{Seq: uint64(i)}) })
	}
	report(b, []string{"delete", "checkpoint"}, &md, &mc)
}
