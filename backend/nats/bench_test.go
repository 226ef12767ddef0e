package nats

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/backendtest"
	"github.com/varve-go/varve/backend/nats/internal/jsclient"
	"github.com/varve-go/varve/internal/testenv"
	"github.com/varve-go/varve/internal/workload"
)

// Benchmarks run against the machine's server (Debian's 2.9) and the
// in-process current release, file storage, one stream per benchmark. The
// baseline, measured in the same run, is a raw synchronous JetStream
// publish of one message of the size of one encoded event; compare the
// ns/op of the varve benchmarks with it. req/op is the number of server
// round trips per operation (Backend.Requests).

const benchEventSize = 100

type benchServer struct {
	name string
	url  func(b *testing.B) string
}

var benchServers = []benchServer{
	{"machine", func(b *testing.B) string { return testenv.NATSURL(b) }},
	{"embedded", func(*testing.B) string { return embeddedURL }},
}

// benchBackend opens a backend on a stream of its own, deleted at the end.
func benchBackend(b *testing.B, url string) (*varve.Store, *Backend) {
	b.Helper()
	cfg := testConfig(url, uniqueName("bench"))
	s, be := mode{}.store(b, cfg)
	return s, be
}

func reportRequests(b *testing.B, be *Backend, before uint64) {
	b.ReportMetric(float64(be.Requests()-before)/float64(b.N), "req/op")
}

func benchEvent() []varve.Event {
	return []varve.Event{{Type: "Bench", Data: make([]byte, benchEventSize)}}
}

// BenchmarkPublish is the baseline: jetstream.Publish of one message, and
// the same with the two headers varve sets on a commit.
func BenchmarkPublish(b *testing.B) {
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			_, be := benchBackend(b, srv.url(b))
			ctx := context.Background()
			data := make([]byte, benchEventSize+stateLen+24)
			subj := be.evPrefix + "raw"
			b.Run("raw", func(b *testing.B) {
				for b.Loop() {
					if _, err := be.js.Publish(ctx, subj, data); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("raw+headers", func(b *testing.B) {
				var last uint64
				i := 0
				for b.Loop() {
					m := &natsgo.Msg{Subject: subj + "h", Data: data, Header: natsgo.Header{}}
					m.Header.Set("Nats-Msg-Id", strconv.Itoa(i))
					m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(last, 10))
					ack, err := be.js.PublishMsg(ctx, m)
					if err != nil {
						b.Fatal(err)
					}
					last = ack.Sequence
					i++
				}
			})
		})
	}
}

// BenchmarkPublishCost alternates, in one loop, a synchronous publish to a
// plain file-backed stream (the raw limit of varve bench), the same
// publish to the backend's stream (which republishes headers for Watch),
// that publish with the two headers a commit carries (Nats-Msg-Id,
// Nats-Expected-Last-Subject-Sequence), with each of them alone, a single
// append through the Store, and one through a Store on a stream without
// notifications (Config.NoNotify), and reports each one's mean time and
// the appends' rates against the plain publish's: what each guarantee of
// an append costs on the server, measured side by side.
func BenchmarkPublishCost(b *testing.B) {
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			s, be := benchBackend(b, srv.url(b))
			quiet := testConfig(srv.url(b), uniqueName("bench"))
			quiet.NoNotify = true
			sq, _ := mode{}.store(b, quiet)
			// Watchers, as a store with live subscriptions has: the server
			// republishes only when someone listens.
			_, _ = s.Watch(), sq.Watch()
			ctx := context.Background()
			plain := uniqueName("plain")
			plainSubj := strings.ToLower(plain) + ".x"
			if _, err := be.js.CreateStream(ctx, jetstream.StreamConfig{Name: plain, Subjects: []string{plainSubj}, Storage: jetstream.FileStorage}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = be.js.DeleteStream(context.Background(), plain) })
			data := make([]byte, benchEventSize+stateLen+24)
			subj := be.evPrefix + "raw"
			var last, lastE uint64
			var v, vq varve.Version
			i := 0
			variants := []func() error{
				func() error { _, err := be.js.Publish(ctx, plainSubj, data); return err },
				func() error { _, err := be.js.Publish(ctx, subj, data); return err },
				func() error {
					m := &natsgo.Msg{Subject: subj + "h", Data: data, Header: natsgo.Header{}}
					m.Header.Set("Nats-Msg-Id", strconv.Itoa(i))
					m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(last, 10))
					ack, err := be.js.PublishMsg(ctx, m)
					if err == nil {
						last = ack.Sequence
					}
					return err
				},
				func() error {
					m := &natsgo.Msg{Subject: subj + "i", Data: data, Header: natsgo.Header{}}
					m.Header.Set("Nats-Msg-Id", strconv.Itoa(i))
					_, err := be.js.PublishMsg(ctx, m)
					return err
				},
				func() error {
					m := &natsgo.Msg{Subject: subj + "e", Data: data, Header: natsgo.Header{}}
					m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(lastE, 10))
					ack, err := be.js.PublishMsg(ctx, m)
					if err == nil {
						lastE = ack.Sequence
					}
					return err
				},
				func() error {
					res, err := s.Append(ctx, "cost", varve.Exact(v), benchEvent()...)
					v = res.LastVersion
					return err
				},
				func() error {
					res, err := sq.Append(ctx, "cost", varve.Exact(vq), benchEvent()...)
					vq = res.LastVersion
					return err
				},
			}
			spent := make([]time.Duration, len(variants))
			for b.Loop() {
				for k, f := range variants {
					t0 := time.Now()
					if err := f(); err != nil {
						b.Fatal(err)
					}
					spent[k] += time.Since(t0)
				}
				i++
			}
			us := func(d time.Duration) float64 { return float64(d) / 1e3 / float64(i) }
			b.ReportMetric(us(spent[0]), "plain-µs")
			b.ReportMetric(us(spent[1]), "republish-µs")
			b.ReportMetric(us(spent[2]), "+headers-µs")
			b.ReportMetric(us(spent[3]), "msgid-µs")
			b.ReportMetric(us(spent[4]), "expect-µs")
			b.ReportMetric(us(spent[5]), "append-µs")
			b.ReportMetric(us(spent[6]), "nonotify-µs")
			b.ReportMetric(float64(spent[0])/float64(spent[5]), "append/plain")
			b.ReportMetric(float64(spent[0])/float64(spent[6]), "nonotify/plain")
			b.ReportMetric(float64(spent[1])/float64(spent[5]), "append/republish")
		})
	}
}

// BenchmarkAppend appends one event (or ten) per operation to one stream at
// an exact expected version, the backend's head cache warm.
func BenchmarkAppend(b *testing.B) {
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			s, be := benchBackend(b, srv.url(b))
			ctx := context.Background()
			for _, n := range []int{1, 10} {
				b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
					stream := fmt.Sprintf("append-%d", n)
					var v varve.Version
					req := be.Requests()
					for b.Loop() {
						evs := make([]varve.Event, n)
						for i := range evs {
							evs[i] = benchEvent()[0]
						}
						res, err := s.Append(ctx, stream, varve.Exact(v), evs...)
						if err != nil {
							b.Fatal(err)
						}
						v = res.LastVersion
					}
					reportRequests(b, be, req)
				})
			}
			b.Run("any", func(b *testing.B) {
				req := be.Requests()
				for b.Loop() {
					if _, err := s.Append(ctx, "append-any", varve.Any, benchEvent()...); err != nil {
						b.Fatal(err)
					}
				}
				reportRequests(b, be, req)
			})
			b.Run("new-stream", func(b *testing.B) {
				req := be.Requests()
				i := 0
				for b.Loop() {
					if _, err := s.Append(ctx, "new-"+strconv.Itoa(i), varve.NoStream, benchEvent()...); err != nil {
						b.Fatal(err)
					}
					i++
				}
				reportRequests(b, be, req)
			})
		})
	}
}

// BenchmarkLoadSave is an aggregate's command cycle, each workload on 100
// aggregates of its own, created with 20 events in commits of 1-3 events
// and a snapshot at their last version:
//   - cached: the aggregate is in memory at version v; load reads the
//     events after v (none: this process wrote them), save appends at v.
//   - snapshot: nothing in memory; load reads the snapshot and the events
//     after it, save appends and, when the version is a multiple of 10,
//     saves a snapshot (so 0-9 events follow the snapshot).
//   - commit-snapshot: as snapshot, with the snapshot kept in every
//     commit (AppendWithSnapshot) and read with ReadFromSnapshot.
//   - replay: nothing in memory, no snapshot used; load reads the whole
//     stream (20 events and more).
//   - snapshot-cold, commit-snapshot-cold, replay-cold: on a second backend
//     that forgets the aggregate's head, scan hint and event id set before
//     each cycle, as a process that meets the aggregate for the first time:
//     its save reads the stream's ids, unless its load read the whole
//     stream.
func BenchmarkLoadSave(b *testing.B) {
	const aggregates = 100
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			s, be := benchBackend(b, srv.url(b))
			ctx := context.Background()
			buf := make([]varve.RecordedEvent, 0, 512)
			setup := func(b *testing.B, workload string) (func(int) string, []varve.Version) {
				versions := make([]varve.Version, aggregates)
				id := func(i int) string { return workload + "-" + strconv.Itoa(i) }
				for i := range aggregates {
					for versions[i] < 20 {
						evs := make([]varve.Event, 1+int(versions[i])%3)
						for j := range evs {
							evs[j] = benchEvent()[0]
						}
						res, err := s.Append(ctx, id(i), varve.Exact(versions[i]), evs...)
						if err != nil {
							b.Fatal(err)
						}
						versions[i] = res.LastVersion
					}
					if err := be.SaveSnapshot(ctx, varve.Snapshot{Stream: id(i), Version: versions[i], Data: make([]byte, 200)}); err != nil {
						b.Fatal(err)
					}
				}
				return id, versions
			}
			save := func(b *testing.B, stream string, v *varve.Version) {
				res, err := s.Append(ctx, stream, varve.Exact(*v), benchEvent()...)
				if err != nil {
					b.Fatal(err)
				}
				*v = res.LastVersion
			}
			cold := open(b, be.cfg)
			forget := cold.streams.forget
			coldSave := func(b *testing.B, stream string, v *varve.Version) {
				evs := benchEvent()
				evs[0].ID = varve.NewEventID() // as the Store does
				res, err := cold.Append(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Exact(*v), Events: evs})
				if err != nil {
					b.Fatal(err)
				}
				*v = res.LastVersion
			}
			b.Run("cached", func(b *testing.B) {
				id, versions := setup(b, "cached")
				req := be.Requests()
				i := 0
				for b.Loop() {
					agg := i % aggregates
					page, err := be.ReadStream(ctx, varve.StreamQuery{Stream: id(agg), From: versions[agg] + 1, Limit: 512}, buf[:0])
					if err != nil || len(page) != 0 {
						b.Fatalf("catch up: %d events, %v", len(page), err)
					}
					save(b, id(agg), &versions[agg])
					i++
				}
				reportRequests(b, be, req)
			})
			// The snapshot and replay cycles, on this backend (warm) and on
			// the one that forgets each aggregate first (cold).
			for _, c := range []struct {
				suffix string
				be     *Backend
				before func(string)
				save   func(*testing.B, string, *varve.Version)
			}{
				{"", be, func(string) {}, save},
				{"-cold", cold, forget, coldSave},
			} {
				b.Run("snapshot"+c.suffix, func(b *testing.B) {
					id, versions := setup(b, "snapshot"+c.suffix)
					req := c.be.Requests()
					i := 0
					for b.Loop() {
						agg := i % aggregates
						c.before(id(agg))
						snap, ok, err := c.be.LoadSnapshot(ctx, id(agg))
						if err != nil || !ok {
							b.Fatalf("load snapshot: %v %v", ok, err)
						}
						page, err := c.be.ReadStream(ctx, varve.StreamQuery{Stream: id(agg), From: snap.Version + 1, Limit: 512}, buf[:0])
						if err != nil || snap.Version+uint64(len(page)) != versions[agg] {
							b.Fatalf("load after snapshot: %d events, %v", len(page), err)
						}
						c.save(b, id(agg), &versions[agg])
						if versions[agg]%10 == 0 {
							if err := c.be.SaveSnapshot(ctx, varve.Snapshot{Stream: id(agg), Version: versions[agg], Data: make([]byte, 200)}); err != nil {
								b.Fatal(err)
							}
						}
						i++
					}
					reportRequests(b, c.be, req)
				})
				b.Run("commit-snapshot"+c.suffix, func(b *testing.B) {
					id, versions := setup(b, "commit-snapshot"+c.suffix)
					snapAt := func(v varve.Version) varve.Snapshot { return varve.Snapshot{Version: v, Data: make([]byte, 200)} }
					commit := func(b *testing.B, be *Backend, stream string, v *varve.Version) {
						evs := benchEvent()
						evs[0].ID = varve.NewEventID()
						res, err := be.AppendWithSnapshot(ctx, varve.AppendRequest{Stream: stream, Expected: varve.Exact(*v), Events: evs}, snapAt(*v+1))
						if err != nil {
							b.Fatal(err)
						}
						*v = res.LastVersion
					}
					for i := range aggregates {
						commit(b, be, id(i), &versions[i]) // the head keeps a snapshot
					}
					req := c.be.Requests()
					i := 0
					for b.Loop() {
						agg := i % aggregates
						c.before(id(agg))
						snap, ok, page, err := c.be.ReadFromSnapshot(ctx, id(agg), 11, buf[:0])
						if err != nil || !ok || snap.Version != versions[agg] || len(page) != 0 {
							b.Fatalf("load: snapshot %v at %d, %d events, %v", ok, snap.Version, len(page), err)
						}
						commit(b, c.be, id(agg), &versions[agg])
						i++
					}
					reportRequests(b, c.be, req)
				})
				b.Run("replay"+c.suffix, func(b *testing.B) {
					id, versions := setup(b, "replay"+c.suffix)
					req := c.be.Requests()
					i := 0
					for b.Loop() {
						agg := i % aggregates
						c.before(id(agg))
						page, err := c.be.ReadStream(ctx, varve.StreamQuery{Stream: id(agg), From: 1, Limit: 512}, buf[:0])
						if err != nil || uint64(len(page)) != versions[agg] {
							b.Fatalf("replay: %d events, %v", len(page), err)
						}
						c.save(b, id(agg), &versions[agg])
						i++
					}
					reportRequests(b, c.be, req)
				})
			}
		})
	}
}

// BenchmarkReadAll reads $all in pages of 7 and of 512 events, over
// 20,000 events in commits of 10 on 50 streams, as a reader that pages on
// (the backend keeps its cursor between pages). It starts again from the
// beginning at the end.
func BenchmarkReadAll(b *testing.B) {
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			s, be := benchBackend(b, srv.url(b))
			ctx := context.Background()
			const total = 20_000
			for i := 0; i < total/10; i++ {
				evs := make([]varve.Event, 10)
				for j := range evs {
					evs[j] = benchEvent()[0]
				}
				if _, err := s.Append(ctx, "all-"+strconv.Itoa(i%50), varve.Any, evs...); err != nil {
					b.Fatal(err)
				}
			}
			for _, limit := range []int{7, 512} {
				b.Run(fmt.Sprintf("page=%d", limit), func(b *testing.B) {
					buf := make([]varve.RecordedEvent, 0, limit)
					req := be.Requests()
					var after varve.Position
					events := 0
					for b.Loop() {
						page, err := be.ReadAll(ctx, varve.AllQuery{After: after, Limit: limit}, buf[:0])
						if err != nil {
							b.Fatal(err)
						}
						events += len(page)
						if len(page) < limit {
							after = varve.Start
						} else {
							after = page[len(page)-1].Position
						}
					}
					b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
					reportRequests(b, be, req)
				})
			}
		})
	}
}

// BenchmarkSuite runs the shared suite, the workloads every backend runs,
// on the in-process current server, with the names every backend's suite
// has (BenchmarkSuite/Consistency/Multi2, say); BenchmarkSuiteMachine runs
// it on the machine's server. Each backend gets a stream of its own,
// deleted after.
func BenchmarkSuite(b *testing.B) { benchSuite(b, embeddedURL) }

func BenchmarkSuiteMachine(b *testing.B) { benchSuite(b, testenv.NATSURL(b)) }

// BenchmarkSuiteMemory runs the shared suite on the in-process server with
// memory storage, where an atomic batch is not staged in a file store.
func BenchmarkSuiteMemory(b *testing.B) {
	benchSuite(b, embeddedURL, func(c *Config) { c.MemoryStorage = true })
}

func benchSuite(b *testing.B, url string, opts ...func(*Config)) {
	backendtest.Benchmark(b, backendtest.Factory{New: func(tb testing.TB) varve.Backend {
		cfg := testConfig(url, uniqueName("suite"))
		for _, o := range opts {
			o(&cfg)
		}
		return mode{}.open(tb, cfg)
	}})
}

func TestScale(t *testing.T) {
	url := testenv.NATSURL(t)
	backendtest.RunScale(t, backendtest.Factory{New: func(tb testing.TB) varve.Backend {
		return mode{}.open(tb, testConfig(url, uniqueName("scale")))
	}}, backendtest.ScaleConfig{Events: 100_000})
}

// BenchmarkFilteredCatchUp catches up on a category that is 1% of a log of
// 100,000 events (commits of 10 events, 100-byte events), from the start,
// in pages of 512: pushed down to the category's subjects, and, in the
// same iteration, as the Store filters a backend without
// varve.FilteredReader (workload.Scanning), and an unfiltered read of as
// many events of $all. An operation is one of each; pushdown-ms, scan-ms
// and unfiltered-ms are their times, scan/pushdown the speed-up of
// pushdown, pushdown-rate/unfiltered-rate the events/s of the filtered
// read over those of the unfiltered one, pushdown-req/op the requests of
// a filtered catch-up.
func BenchmarkFilteredCatchUp(b *testing.B) {
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			s, be := benchBackend(b, srv.url(b))
			ctx := context.Background()
			const total, commit, hotEvery = 100_000, 10, 100
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for w := range 4 {
				wg.Go(func() {
					for i := w; i < total/commit; i += 4 {
						evs := make([]varve.Event, commit)
						for j := range evs {
							evs[j] = benchEvent()[0]
						}
						stream := "cold-" + strconv.Itoa(i%1000)
						if i%hotEvery == 0 {
							stream = "hot-" + strconv.Itoa(i%7)
						}
						if _, err := s.Append(ctx, stream, varve.Any, evs...); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			f := varve.Filter{Categories: []string{"hot"}}
			scanning, err := workload.Scanning(s)
			if err != nil {
				b.Fatal(err)
			}
			defer scanning.Close()
			catchUp := func(scan bool) (int, time.Duration) {
				start := time.Now()
				buf := make([]varve.RecordedEvent, 0, 512)
				pos, n := varve.Start, 0
				for {
					st := s
					if scan {
						st = scanning
					}
					page, err := st.ReadAllPage(ctx, pos, buf[:0], f, varve.Limit(512))
					if err != nil {
						b.Fatal(err)
					}
					n += len(page.Events)
					pos = page.Through
					if len(page.Events) < 512 {
						return n, time.Since(start)
					}
				}
			}
			// plain reads as many events of $all, unfiltered, in pages of
			// 512: the events/s a filtered read is compared with.
			plain := func() time.Duration {
				start := time.Now()
				buf := make([]varve.RecordedEvent, 0, 512)
				pos, n := varve.Start, 0
				for n < total/hotEvery {
					page, err := s.ReadAllPage(ctx, pos, buf[:0], varve.Limit(min(512, total/hotEvery-n)))
					if err != nil {
						b.Fatal(err)
					}
					n += len(page.Events)
					pos = page.Through
				}
				return time.Since(start)
			}
			var push, scan, all time.Duration
			var req uint64
			for b.Loop() {
				r0 := be.Requests()
				np, dp := catchUp(false)
				req += be.Requests() - r0
				ns, ds := catchUp(true)
				if np != total/hotEvery || ns != np {
					b.Fatalf("pushdown read %d events, the scan %d, want %d", np, ns, total/hotEvery)
				}
				push += dp
				scan += ds
				all += plain()
			}
			b.ReportMetric(float64(push)/1e6/float64(b.N), "pushdown-ms/op")
			b.ReportMetric(float64(scan)/1e6/float64(b.N), "scan-ms/op")
			b.ReportMetric(float64(all)/1e6/float64(b.N), "unfiltered-ms/op")
			b.ReportMetric(float64(req)/float64(b.N), "pushdown-req/op")
			b.ReportMetric(float64(scan)/float64(push), "scan/pushdown")
			b.ReportMetric(float64(all)/float64(push), "pushdown-rate/unfiltered-rate")
		})
	}
}

// BenchmarkPublishBatch measures what an atomic batch costs the in-process
// server against a single publish, on file and memory storage: a batch of
// 1 and of 2 messages of 200 bytes. On file storage an R1 stream stages
// every batch in a file store of its own, synced, before the commit.
func BenchmarkPublishBatch(b *testing.B) {
	for _, mem := range []bool{false, true} {
		name := "file"
		if mem {
			name = "mem"
		}
		b.Run(name, func(b *testing.B) {
			cfg := testConfig(embeddedURL, uniqueName("batch"))
			cfg.MemoryStorage = mem
			be := mode{}.open(b, cfg)
			ctx := ctxT(b)
			data := make([]byte, 200)
			b.Run("single", func(b *testing.B) {
				for b.Loop() {
					if _, err := be.c.Publish(ctx, be.evPrefix+"x.y", data, jsclient.Expect{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			for _, n := range []int{1, 2} {
				b.Run("batch"+string(rune('0'+n)), func(b *testing.B) {
					msgs := make([]jsclient.BatchMsg, n)
					for i := range msgs {
						msgs[i] = jsclient.BatchMsg{Subject: be.evPrefix + "x.y", Data: data}
					}
					for b.Loop() {
						if _, err := be.c.PublishBatch(ctx, msgs); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
