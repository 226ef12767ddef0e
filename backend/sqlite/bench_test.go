package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
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

func eventsPerSec(b *testing.B, events int64) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// baseline opens a database with the backend's pragmas and a plain table.
func baseline(b *testing.B, sync Synchronous) *conn {
	b.Helper()
	var reqs atomic.Uint64
	c, err := openConn(filepath.Join(b.TempDir(), "baseline.db"), "mode=rwc", &reqs)
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

// parallel runs b.N calls of fn spread over g goroutines; fn gets the
// goroutine's index.
func parallel(b *testing.B, g int, fn func(worker int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range g {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := fn(w); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
}

func BenchmarkAppend(b *testing.B) {
	for _, sync := range []Synchronous{SyncFull, SyncNormal} {
		b.Run("sync="+sync.String(), func(b *testing.B) {
			b.Run("baseline-insert/g=1", func(b *testing.B) {
				c := baseline(b, sync)
				parallel(b, 1, func(int) error {
					if _, err := c.exec(bg, "BEGIN IMMEDIATE"); err != nil {
						return err
					}
					if _, err := c.exec(bg, "INSERT INTO t (type, data, metadata) VALUES (?1, ?2, ?3)", "OrderPlaced", benchData, benchMeta); err != nil {
						return err
					}
					_, err := c.exec(bg, "COMMIT")
					return err
				})
				eventsPerSec(b, int64(b.N))
			})
			// The same bare INSERT into a table shaped like varve's events
			// (three b-trees: position, stream+version, stream+event id), to
			// tell the cost of the schema from the cost of the machinery.
			b.Run("baseline-insert-indexed/g=1", func(b *testing.B) {
				c := baseline(b, sync)
				if _, err := c.exec(bg, "CREATE TABLE e (pos INTEGER PRIMARY KEY, stream INTEGER, version INTEGER, id BLOB, type TEXT, data BLOB, metadata BLOB, at INTEGER, UNIQUE (stream, version), UNIQUE (stream, id))"); err != nil {
					b.Fatal(err)
				}
				var v int64
				parallel(b, 1, func(int) error {
					if _, err := c.exec(bg, "BEGIN IMMEDIATE"); err != nil {
						return err
					}
					v++
					id := varve.NewEventID()
					if _, err := c.exec(bg, "INSERT INTO e (pos, stream, version, id, type, data, metadata, at) VALUES (?1, 1, ?1, ?2, ?3, ?4, ?5, ?6)",
						v, id[:], "OrderPlaced", benchData, benchMeta, time.Now().UnixNano()); err != nil {
						return err
					}
					_, err := c.exec(bg, "COMMIT")
					return err
				})
				eventsPerSec(b, int64(b.N))
			})
			for _, g := range []int{1, 8} {
				b.Run(fmt.Sprintf("varve-single/g=%d", g), func(b *testing.B) {
					s, be := benchStore(b, Config{Synchronous: sync})
					parallel(b, g, func(w int) error {
						_, err := s.Append(bg, fmt.Sprintf("order-%d", w), varve.Any, benchEvents(1)...)
						return err
					})
					eventsPerSec(b, int64(b.N))
					st := be.Stats()
					b.ReportMetric(float64(st.Writes)/float64(max(st.Commits, 1)), "appends/commit")
				})
			}
			b.Run("varve-batch100/g=1", func(b *testing.B) {
				s, _ := benchStore(b, Config{Synchronous: sync})
				parallel(b, 1, func(int) error {
					_, err := s.Append(bg, "orders", varve.Any, benchEvents(100)...)
					return err
				})
				eventsPerSec(b, 100*int64(b.N))
			})
		})
	}
}

func BenchmarkReadStream(b *testing.B) {
	const n = 1000
	b.Run("baseline-select", func(b *testing.B) {
		c := baseline(b, SyncNormal)
		if _, err := c.exec(bg, "BEGIN"); err != nil {
			b.Fatal(err)
		}
		for range n {
			if _, err := c.exec(bg, "INSERT INTO t (type, data, metadata) VALUES (?1, ?2, ?3)", "OrderPlaced", benchData, benchMeta); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := c.exec(bg, "COMMIT"); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			rows := 0
			err := c.query(bg, "SELECT id, type, data, metadata FROM t ORDER BY id", func(v []driver.Value) error {
				rows++
				return nil
			})
			if err != nil || rows != n {
				b.Fatalf("%d rows, %v", rows, err)
			}
		}
		eventsPerSec(b, n*int64(b.N))
	})
	b.Run("varve-1000", func(b *testing.B) {
		s, _ := benchStore(b, Config{Synchronous: SyncNormal})
		if _, err := s.Append(bg, "long", varve.NoStream, benchEvents(n)...); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			rows := 0
			for _, err := range s.ReadStream(bg, "long") {
				if err != nil {
					b.Fatal(err)
				}
				rows++
			}
			if rows != n {
				b.Fatalf("%d events", rows)
			}
		}
		eventsPerSec(b, n*int64(b.N))
	})
	b.Run("varve-all-1000", func(b *testing.B) {
		s, _ := benchStore(b, Config{Synchronous: SyncNormal})
		if _, err := s.Append(bg, "long", varve.NoStream, benchEvents(n)...); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			rows := 0
			for _, err := range s.ReadAll(bg, varve.Start) {
				if err != nil {
					b.Fatal(err)
				}
				rows++
			}
			if rows != n {
				b.Fatalf("%d events", rows)
			}
		}
		eventsPerSec(b, n*int64(b.N))
	})
}
