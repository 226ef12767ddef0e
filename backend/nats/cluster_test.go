package nats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/varve-go/varve"
)

// testCluster is a JetStream cluster of in-process servers on loopback,
// each with its own store directory.
type testCluster struct {
	servers []*server.Server
	names   []string
}

// startCluster starts n servers. The first (the seed) listens for routes
// on a port picked free just before it starts and routes to itself, as
// JetStream wants a configured route; the others listen on ports of their
// own choosing and route to the servers started before them, learning of
// each other from the seed. A port picked free can still be taken by a
// parallel test's connection before the seed binds it (a server then never
// became ready: CI, when every server's port was picked up front), so a
// cluster that does not start is stopped and started again, three times
// at most.
func startCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	var err error
	for try := 0; try < 3; try++ {
		c := &testCluster{}
		if err = c.start(t, n); err == nil {
			t.Cleanup(c.shutdown)
			return c
		}
		c.shutdown()
	}
	t.Fatal(err)
	return nil
}

func (c *testCluster) start(t testing.TB, n int) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	seed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	for i := range n {
		port := -1
		var routes []*url.URL
		if i == 0 {
			port = seed
			routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", seed)})
		}
		for _, s := range c.servers {
			routes = append(routes, &url.URL{Scheme: "nats", Host: s.ClusterAddr().String()})
		}
		name := fmt.Sprintf("n%d", i)
		s, err := server.NewServer(&server.Options{
			ServerName: name,
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "varve-test", Host: "127.0.0.1", Port: port},
			Routes:     routes,
		})
		if err != nil {
			return fmt.Errorf("server %s: %w", name, err)
		}
		s.SetLoggerV2(&serverLog{}, false, false, false)
		s.Start()
		c.servers = append(c.servers, s)
		c.names = append(c.names, name)
		if !s.ReadyForConnections(10 * time.Second) {
			return fmt.Errorf("server %s did not start (server log: %s)", name, serverWarnings())
		}
	}
	return nil
}

func (c *testCluster) urls() string {
	var u []string
	for _, s := range c.servers {
		if s.Running() {
			u = append(u, s.ClientURL())
		}
	}
	return strings.Join(u, ",")
}

func (c *testCluster) stop(name string) {
	for i, s := range c.servers {
		if c.names[i] == name {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
}

func (c *testCluster) metaLeader() bool {
	for _, s := range c.servers {
		if s.Running() && s.JetStreamIsLeader() {
			return true
		}
	}
	return false
}

func (c *testCluster) shutdown() {
	for _, s := range c.servers {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// streamLeader returns the name of the server that leads the stream.
func streamLeader(ctx context.Context, url, stream string) (string, error) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	ci := s.CachedInfo().Cluster
	if ci == nil || ci.Leader == "" {
		return "", errors.New("stream has no leader")
	}
	var replicas []string
	for _, r := range ci.Replicas {
		replicas = append(replicas, r.Name)
	}
	if len(replicas) != 2 {
		return "", fmt.Errorf("stream leader %s has replicas %v, want 2", ci.Leader, replicas)
	}
	return ci.Leader, nil
}

// openClustered opens the backend once the cluster has a meta leader. The
// cluster elects it in the first second or so; until then a JetStream
// request gets no answer, and creating a replicated stream can fail while
// the leader learns its peers.
func openClustered(tb testing.TB, cl *testCluster, cfg Config) *Backend {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cl.metaLeader() {
		if time.Now().After(deadline) {
			tb.Fatalf("no JetStream meta leader within 30s (server log: %s)", serverWarnings())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := New(ctx, cfg)
		cancel()
		if err == nil {
			tb.Cleanup(func() { _ = b.Close() })
			return b
		}
		if time.Now().After(deadline) {
			tb.Fatalf("open backend on the cluster: %v (server log: %s)", err, serverWarnings())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// BenchmarkClusterAppend appends one 84-byte event per call from
// 4*GOMAXPROCS goroutines (each to a stream of its own) to an R1 and an R3
// stream of the same in-process 3-node cluster: R1 is the baseline of R3.
// The three servers share the machine's cores with the benchmark.
func BenchmarkClusterAppend(b *testing.B) {
	cl := startCluster(b, 3)
	for _, r := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d", r), func(b *testing.B) {
			cfg := testConfig(cl.urls(), uniqueName(fmt.Sprintf("bench_r%d", r)))
			cfg.Replicas = r
			s, err := varve.New(openClustered(b, cl, cfg), varve.Config{})
			if err != nil {
				b.Fatal(err)
			}
			var streams atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				stream := fmt.Sprintf("s%d", streams.Add(1))
				data := make([]byte, 84)
				for pb.Next() {
					if _, err := s.Append(context.Background(), stream, varve.Any, varve.Event{Type: "T", Data: data}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// TestClusterLeaderFailover runs appenders and a $all reader against a
// stream with 3 replicas on a 3-node cluster and stops the stream's leader
// in the middle of the load (an in-process server's Shutdown: its client
// and route connections close at once, its Raft groups lose a member).
//
// Half the writers retry a failed append with the same events and
// expectation until it is acknowledged (what the package doc recommends:
// an error is an unknown outcome, and the retry is answered with the
// original result if the first try was stored); the other half give a
// failed append up and go on with new events, so their failed appends are
// the ambiguous ones. Afterwards $all, read whole, holds every acknowledged
// event exactly once, each given-up event at most once, nothing else, in
// strictly increasing positions; the reader that ran through the fail-over
// and the filtered readers saw a prefix of it; and appends resumed within
// 30 s of the stop (the time is logged, not asserted).
func TestClusterLeaderFailover(t *testing.T) {
	cl := startCluster(t, 3)
	name := uniqueName("cluster")
	cfg := testConfig(cl.urls(), name)
	cfg.Replicas = 3
	cfg.RequestTimeout = 2 * time.Second
	cfg.Options = []natsgo.Option{
		natsgo.ReconnectWait(20 * time.Millisecond),
		natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}),
	}

	b := openClustered(t, cl, cfg)
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}

	before, during, after := 1500*time.Millisecond, 30*time.Second, 1500*time.Millisecond
	if testing.Short() {
		before, after = 700*time.Millisecond, 700*time.Millisecond
	}
	const writers, callTimeout = 4, 2 * time.Second

	var (
		mu       sync.Mutex
		acked    = map[uuid.UUID]varve.Position{}
		givenUp  = map[uuid.UUID]bool{}
		failures int
		// Appends that failed before the leader stopped: none should (on
		// R3 the leader refuses an expected sequence while the subject's
		// last message is still being replicated, which the backend
		// retries).
		failedBefore []error
		retried      int // failed appends of retrying writers later acknowledged
		killedAt     time.Time
		resumedAt    time.Time
		resumed      = make(chan struct{})
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		retry := w%2 == 0
		wg.Go(func() {
			stream := fmt.Sprintf("w%d", w)
			version := varve.Version(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				evs := makeEvents(1+w%3, 64)
				failedOnce := false
				for {
					expect := varve.Any
					if retry {
						expect = varve.Exact(version)
					}
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					start := time.Now()
					res, err := s.Append(ctx, stream, expect, evs...)
					cancel()
					mu.Lock()
					if err == nil {
						for _, e := range evs {
							acked[e.ID] = res.Position
						}
						if failedOnce {
							retried++
						}
						if !killedAt.IsZero() && start.After(killedAt) && resumedAt.IsZero() {
							resumedAt = time.Now()
							close(resumed)
						}
					} else {
						failures++
						if killedAt.IsZero() {
							failedBefore = append(failedBefore, err)
						}
						if !retry {
							for _, e := range evs {
								givenUp[e.ID] = true
							}
						}
					}
					mu.Unlock()
					if err == nil {
						version = res.LastVersion
						break
					}
					// A pause after a failure, as a client would back off:
					// calls that fail at once would spin on 2 cores.
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if !retry {
						break
					}
					failedOnce = true
				}
			}
		})
	}

	// Three readers page through $all as the writers append, one whole,
	// one filtered by a category and one by two (each page going through
	// the page's Through), and keep what they read, to be compared with
	// the whole log at the end. Before the fix of filter.go for replicated
	// streams, the category reader skipped commits in 3 runs of 3, with or
	// without the stop: its page's Through came from a replica ahead of the
	// one that answered its cursor.
	type liveReader struct {
		filter varve.Filter
		events []varve.RecordedEvent
		errs   int
		err    error
	}
	readers := []*liveReader{{},
		{filter: varve.Filter{Categories: []string{"w1"}}},
		{filter: varve.Filter{Categories: []string{"w0", "w3"}}},
	}
	for _, r := range readers {
		wg.Go(func() {
			var after varve.Position
			for {
				select {
				case <-stop:
					return
				default:
				}
				opts := []varve.AllOption{varve.Limit(100)}
				if !r.filter.IsZero() {
					opts = append(opts, r.filter)
				}
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				page, err := s.ReadAllPage(ctx, after, nil, opts...)
				cancel()
				if err != nil {
					r.errs++
					time.Sleep(20 * time.Millisecond)
					continue
				}
				for _, e := range page.Events {
					if !after.Less(e.Position) {
						r.err = fmt.Errorf("$all reader %v: position %s after %s", r.filter, e.Position, after)
						return
					}
					after = e.Position
					r.events = append(r.events, e)
				}
				after = page.Through
				if len(page.Events) == 0 {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}

	time.Sleep(before)
	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	leader, err := streamLeader(lctx, cl.urls(), name)
	lcancel()
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("stream leader: %v", err)
	}
	mu.Lock()
	ackedBefore := len(acked)
	killedAt = time.Now()
	mu.Unlock()
	cl.stop(leader)
	stopped := time.Since(killedAt)
	// The survivors elect a new leader; appends in flight at the stop wait
	// out their timeout, so this is the fail-over itself.
	var elected time.Duration
	for elected == 0 && time.Since(killedAt) < during {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		l, err := streamLeader(ctx, cl.urls(), name)
		cancel()
		if err == nil && l != leader {
			elected = time.Since(killedAt)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-resumed:
	case <-time.After(during - time.Since(killedAt)):
	}
	time.Sleep(after)
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for _, r := range readers {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	if resumedAt.IsZero() {
		t.Fatalf("no append succeeded within %v of stopping the leader %s (%d failed calls; server log: %s)",
			during, leader, failures, serverWarnings())
	}
	nctx, ncancel := context.WithTimeout(context.Background(), 10*time.Second)
	newLeader, nerr := streamLeader(nctx, cl.urls(), name)
	ncancel()
	t.Logf("stopped stream leader %s (Shutdown took %v); new leader %s seen %v after the stop; first append started after the stop succeeded %v after it",
		leader, stopped.Round(time.Millisecond), newLeader, elected.Round(time.Millisecond), resumedAt.Sub(killedAt).Round(time.Millisecond))
	if nerr != nil || newLeader == leader {
		t.Errorf("after the stop: stream leader %q (%v), want one other than %s", newLeader, nerr, leader)
	}
	if len(failedBefore) > 0 {
		t.Errorf("%d appends failed before the leader stopped, the first with %v", len(failedBefore), failedBefore[0])
	}
	if len(acked) == ackedBefore {
		t.Errorf("no append was acknowledged after the stop")
	}

	// The whole log, read after the fail-over.
	var all []varve.RecordedEvent
	var pos varve.Position
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		page, err := s.ReadAllPage(ctx, pos, nil)
		cancel()
		if err != nil {
			t.Fatalf("read $all after %s: %v", pos, err)
		}
		if len(page.Events) == 0 {
			break
		}
		all = append(all, page.Events...)
		pos = page.Through
	}
	seen := map[uuid.UUID]int{}
	var last varve.Position
	ambiguousStored := 0
	for i, e := range all {
		if i > 0 && !last.Less(e.Position) {
			t.Fatalf("$all: event %d at %s after %s", i, e.Position, last)
		}
		last = e.Position
		seen[e.ID]++
		if seen[e.ID] > 1 {
			t.Fatalf("$all: event %s twice (at %s)", e.ID, e.Position)
		}
		if _, ok := acked[e.ID]; ok {
			continue
		}
		if !givenUp[e.ID] {
			t.Fatalf("$all: event %s at %s was neither acknowledged nor given up", e.ID, e.Position)
		}
		ambiguousStored++
	}
	for id, p := range acked {
		if seen[id] != 1 {
			t.Fatalf("acknowledged event %s (append at %s) is stored %d times", id, p, seen[id])
		}
	}
	for _, r := range readers {
		var want []varve.RecordedEvent
		for i := range all {
			if r.filter.Match(&all[i], "-") {
				want = append(want, all[i])
			}
		}
		if len(r.events) > len(want) {
			t.Fatalf("reader %v read %d events, the log has %d of them", r.filter, len(r.events), len(want))
		}
		for i, e := range r.events {
			if e.ID == want[i].ID && e.Position == want[i].Position {
				continue
			}
			t.Fatalf("reader %v: event %d is %s at %s, the log has %s at %s", r.filter, i, e.ID, e.Position, want[i].ID, want[i].Position)
		}
		t.Logf("reader %+v read %d of the log's %d events, %d of its pages failed", r.filter, len(r.events), len(want), r.errs)
	}
	t.Logf("%d events in $all: %d acknowledged (%d before the stop), %d of %d given-up events stored; %d failed appends (%d later acknowledged by a retry)",
		len(all), len(acked), ackedBefore, ambiguousStored, len(givenUp), failures, retried)
}
