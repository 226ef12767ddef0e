package natschaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/nats"
	"github.com/varve-go/varve/internal/natschaos"
	"github.com/varve-go/varve/internal/natscluster"
	"github.com/varve-go/varve/internal/verify"
)

// TestMain lets the test binary serve as a nats-server of go.mod's
// version when a cluster starts it as one.
func TestMain(m *testing.M) {
	natscluster.Serve()
	os.Exit(m.Run())
}

const stream = "CHAOS"

// server is a server build to run the cluster on.
type server struct {
	name   string
	binary string // "" for go.mod's nats-server, in this test binary
}

// servers are go.mod's nats-server and, where installed, the system's
// nats-server binary (Debian's 2.9).
func servers(t *testing.T) []server {
	out := []server{{name: "go.mod"}}
	if p, err := exec.LookPath("nats-server"); err == nil {
		out = append(out, server{name: version(p), binary: p})
	} else if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		out = append(out, server{name: version("/usr/sbin/nats-server"), binary: "/usr/sbin/nats-server"})
	} else {
		t.Logf("no nats-server binary installed: only go.mod's server is tested")
	}
	return out
}

func version(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return bin
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server: ")
}

func start(t *testing.T, srv server) *natschaos.Driver {
	t.Helper()
	seed, err := natschaos.SeedFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := natschaos.Start(ctx, natscluster.Config{Binary: srv.binary, Dir: t.TempDir()}, stream, seed, t.Logf)
	if err != nil {
		t.Fatalf("a 3-node cluster of %s: %v", srv.name, err)
	}
	t.Cleanup(d.Stop)
	return d
}

// open opens a store on the cluster's event stream with three replicas.
// The client pings each second and gives up a server after two pings
// without an answer, so that it leaves a frozen node within ~3 s.
func open(t *testing.T, urls string, replicas int) *varve.Store {
	t.Helper()
	s, err := tryOpen(t, urls, replicas)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tryOpen opens the store, trying again for a minute while the cluster
// forms; a refusal (varve.ErrNotSupported) ends it at once.
func tryOpen(t *testing.T, urls string, replicas int) (*varve.Store, error) {
	t.Helper()
	cfg := nats.Config{URL: urls, Stream: stream, Prefix: "chaos", Replicas: replicas, RequestTimeout: 2 * time.Second,
		Options: []natsgo.Option{
			natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50 * time.Millisecond),
			natsgo.PingInterval(time.Second), natsgo.MaxPingsOutstanding(2),
			natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}),
		}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b *nats.Backend
	var err error
	// A new cluster's meta leader may still be learning its peers: creating
	// a replicated stream then fails for a moment.
	for b, err = nats.New(ctx, cfg); err != nil && !errors.Is(err, varve.ErrNotSupported) && ctx.Err() == nil; b, err = nats.New(ctx, cfg) {
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, nil
}

func probe(s *varve.Store) func(context.Context) error {
	return func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := s.Append(actx, "probe", varve.Any, varve.Event{ID: varve.NewEventID(), Type: "Probe"})
		return err
	}
}

// underFaults runs the checker of package verify (writers with conflicts
// and unknown outcomes, readers of $all and of a category; with consumers,
// a delivery in 3 segments and a projection too) on a store of the
// cluster while n faults, drawn from the seed (or given as kinds), are
// made one after the other; it returns the checker's result and the
// unavailability per fault kind.
func underFaults(t *testing.T, d *natschaos.Driver, s *varve.Store, n int, consumers bool, kinds ...natschaos.Kind) (verify.Result, map[natschaos.Kind][]time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	if err := d.Cluster.WaitCurrent(ctx, stream); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	type outcome struct {
		res verify.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		cfg := verify.Config{Writers: 4, Streams: 8, Stop: stop, AppendTimeout: 3 * time.Second}
		if consumers {
			cfg.DeliverySegments, cfg.Projection = 3, true
		}
		res, err := verify.Run(ctx, s, cfg)
		done <- outcome{res, err}
	}()
	unavail := map[natschaos.Kind][]time.Duration{}
	for i := range n {
		f := d.Next()
		if i < len(kinds) {
			f.Kind, f.For = kinds[i], time.Second
		}
		u, err := d.Run(ctx, &f, probe(s))
		if err != nil {
			close(stop)
			<-done
			t.Fatalf("fault %d (%s of %s): %v", i+1, f.Kind, f.Node, err)
		}
		unavail[f.Kind] = append(unavail[f.Kind], u)
	}
	close(stop)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Logf("checker done in %v", o.res.Elapsed)
	if consumers && (len(o.res.NotRun) > 0 || o.res.Delivered < o.res.Events || o.res.Projected != o.res.Events) {
		t.Fatalf("a consumer did not run, or not over every event: %+v", o.res)
	}
	return o.res, unavail
}

func report(t *testing.T, name string, d *natschaos.Driver, res verify.Result, unavail map[natschaos.Kind][]time.Duration) {
	t.Helper()
	faults := 0
	for k := natschaos.KillLeader; k <= natschaos.PauseFollower; k++ {
		us := unavail[k]
		if len(us) == 0 {
			continue
		}
		faults += len(us)
		slices.Sort(us)
		t.Logf("%s %-14s n=%d unavailable p50=%v max=%v", name, k, len(us), us[len(us)/2].Round(time.Millisecond), us[len(us)-1].Round(time.Millisecond))
	}
	fmt.Printf("natschaos %s seed %d: %d faults, %d acknowledged, %d refused, %d unknown (%d of them stored), %d events verified, readers saw %d, delivered %d (%d again) by %d segment runs, projected %d, consumer restarts %d\n",
		name, d.Seed, faults, res.Acknowledged, res.Refused, res.Unknown, res.UnknownStored, res.Events, res.ReaderEvents,
		res.Delivered, res.Redelivered, res.DeliveryRuns, res.Projected, res.ConsumerRestarts)
	if !res.OK() {
		t.Fatalf("anomalies on %s (seed %d, checker seed %d):\n%s", name, d.Seed, res.Seed, strings.Join(res.Anomalies, "\n"))
	}
	if res.Acknowledged == 0 || res.Events == 0 {
		t.Fatalf("no acknowledged append on %s: the run proves nothing: %+v", name, res)
	}
}

// TestFaults is the short run of make test: on an R3 stream of go.mod's
// server, the checker runs through a SIGKILL of the stream's leader and
// one of a follower, each restarted; nothing acknowledged is lost, no
// reader skipped an event.
func TestFaults(t *testing.T) {
	srv := servers(t)[0]
	d := start(t, srv)
	s := open(t, d.Cluster.URLs(), 3)
	res, unavail := underFaults(t, d, s, 2, false, natschaos.KillLeader, natschaos.KillFollower)
	report(t, srv.name, d, res, unavail)
}

// TestChaosLong runs VARVE_CHAOS_FAULTS (default 50) faults drawn from
// the seed on each server build, under the checker; opt-in:
// VARVE_CHAOS=long (make chaos-nats).
func TestChaosLong(t *testing.T) {
	if os.Getenv("VARVE_CHAOS") != "long" {
		t.Skip("set VARVE_CHAOS=long to run the long fault schedule")
	}
	n := 50
	if v, err := strconv.Atoi(os.Getenv("VARVE_CHAOS_FAULTS")); err == nil && v > 0 {
		n = v
	}
	for _, srv := range servers(t) {
		t.Run(srv.name, func(t *testing.T) {
			d := start(t, srv)
			s, err := tryOpen(t, d.Cluster.URLs(), 3)
			if errors.Is(err, varve.ErrNotSupported) && !serialChecks(srv) {
				t.Skipf("%s refuses an R3 stream, as it must (TestOldServerRefusesR3): %v", srv.name, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			res, unavail := underFaults(t, d, s, n, true)
			report(t, srv.name, d, res, unavail)
		})
	}
}

// serialChecks reports whether the server build checks expected subject
// sequences of a replicated stream one after the other (2.9.21 on).
func serialChecks(srv server) bool {
	var ma, mi, pa int
	if _, err := fmt.Sscanf(srv.name, "v%d.%d.%d", &ma, &mi, &pa); err != nil {
		return true // go.mod's
	}
	return ma > 2 || ma == 2 && (mi > 9 || mi == 9 && pa >= 21)
}

// TestOldServerRefusesR3: on an installed server before 2.9.21, where
// concurrent publishes to a replicated stream at the same expected
// subject sequence can all be stored (nats-server #4320; the checker
// found 880 duplicate versions in 10 s of 4 writers on 2.9.10, with no
// fault), the backend refuses an R3 stream with varve.ErrNotSupported;
// on a later one it opens it.
func TestOldServerRefusesR3(t *testing.T) {
	all := servers(t)
	if len(all) < 2 {
		t.Skip("no nats-server binary installed")
	}
	srv := all[1]
	d := start(t, srv)
	_, err := tryOpen(t, d.Cluster.URLs(), 3)
	switch {
	case serialChecks(srv) && err != nil:
		t.Fatalf("%s: an R3 stream: %v", srv.name, err)
	case !serialChecks(srv) && !errors.Is(err, varve.ErrNotSupported):
		t.Fatalf("%s: an R3 stream: %v, want ErrNotSupported", srv.name, err)
	}
	t.Logf("%s: %v", srv.name, err)
}

// TestR1 runs the checker on an R1 stream of a single server that is
// killed (SIGKILL) and started again on its store, and then, the negative
// proof, one whose store is lost on the way (the directory removed, the
// server started again empty, the event stream created anew): the first
// keeps every acknowledged append, the second loses them and the checker
// says so.
func TestR1(t *testing.T) {
	for _, wipe := range []bool{false, true} {
		t.Run(map[bool]string{false: "kill", true: "wipe"}[wipe], func(t *testing.T) {
			res := r1(t, wipe)
			t.Logf("checker: %d acknowledged, %d unknown, %d anomalies, first: %v", res.Acknowledged, res.Unknown, res.AnomalyCount, res.Anomalies[:min(3, len(res.Anomalies))])
			lost := strings.Contains(strings.Join(res.Anomalies, "\n"), "lost")
			switch {
			case !wipe && !res.OK():
				t.Fatalf("anomalies after a SIGKILL of an R1 server:\n%s", strings.Join(res.Anomalies, "\n"))
			case wipe && (res.OK() || !lost):
				t.Fatalf("the checker found no loss after the only node's store was wiped: %+v", res)
			}
		})
	}
}

func r1(t *testing.T, wipe bool) verify.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := natscluster.Start(ctx, natscluster.Config{Nodes: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	s := open(t, c.URLs(), 1)
	stop := make(chan struct{})
	type outcome struct {
		res verify.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := verify.Run(ctx, s, verify.Config{Writers: 2, Streams: 4, Stop: stop, AppendTimeout: 2 * time.Second, LagWait: time.Second})
		done <- outcome{res, err}
	}()
	for p, err := s.LastPosition(ctx); err != nil || p.Commit < 50; p, err = s.LastPosition(ctx) {
		if ctx.Err() != nil {
			t.Fatalf("no 50 events appended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := c.Nodes[0]
	n.Kill()
	if wipe {
		if err := n.Wipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if wipe {
		open(t, c.URLs(), 1) // creates the event stream again, empty
	}
	// Appends go on until one succeeds after the restart.
	for err := probe(s)(ctx); err != nil; err = probe(s)(ctx) {
		if ctx.Err() != nil {
			t.Fatalf("no append after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.res
}
