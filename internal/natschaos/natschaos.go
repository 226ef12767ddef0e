// Package natschaos breaks a three-node NATS JetStream cluster of real
// server processes on purpose, for tests that prove what varve keeps
// under faults (issue #39).
//
// A [Driver] runs a [natscluster.Cluster] and watches one JetStream
// stream (varve's event stream, replicated on all three nodes). Its
// faults are chosen by the stream's roles at the time of the fault:
//
//   - [KillLeader], [KillFollower]: SIGKILL of the stream's leader or of
//     a follower; healed, after the fault's down time, by starting the
//     node again on its store.
//   - [PauseLeader], [PauseFollower]: SIGSTOP of the node for longer than
//     the Raft election timeout (9 s at most), so that a paused leader is
//     replaced; healed by SIGCONT.
//
// Heal returns once the stream has a leader and every replica is current
// again, so that the next fault meets a whole cluster. The seed is
// VARVE_CHAOS_SEED when set, else the clock's; the driver logs it, and the
// same seed draws the same schedule. A Driver is used by one goroutine.
package natschaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/varve-go/varve/internal/chaos"
	"github.com/varve-go/varve/internal/natscluster"
)

// Kind is a kind of fault.
type Kind int

const (
	KillLeader Kind = iota
	KillFollower
	PauseLeader
	PauseFollower
	numKinds
)

func (k Kind) String() string {
	switch k {
	case KillLeader:
		return "kill-leader"
	case KillFollower:
		return "kill-follower"
	case PauseLeader:
		return "pause-leader"
	case PauseFollower:
		return "pause-follower"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is one injected fault.
type Fault struct {
	Kind Kind
	// For is how long the node stays down (killed) or frozen (paused).
	For time.Duration
	// Node is the node the fault hit, and At when; both set by Inject.
	Node string
	At   time.Time
}

// Driver owns a cluster and breaks it.
type Driver struct {
	Seed    int64
	Cluster *natscluster.Cluster
	stream  string
	rng     *rand.Rand
	logf    func(format string, args ...any)
}

// Start starts a three-node cluster of cfg and a driver of its stream
// stream (which the caller creates, with three replicas). logf (t.Logf,
// say) receives the seed and every fault.
func Start(ctx context.Context, cfg natscluster.Config, stream string, seed int64, logf func(string, ...any)) (*Driver, error) {
	cfg.Nodes = 3
	c, err := natscluster.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	d := &Driver{Seed: seed, Cluster: c, stream: stream, rng: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)), logf: logf}
	d.logf("natschaos: seed %d (VARVE_CHAOS_SEED=%d replays), nodes %s", seed, seed, c.URLs())
	return d, nil
}

// SeedFromEnv returns VARVE_CHAOS_SEED, or the clock's nanoseconds.
func SeedFromEnv() (int64, error) { return chaos.SeedFromEnv() }

// Next draws the next fault: its kind, and its time down (0.2-2 s) or
// frozen (9.5-12 s).
func (d *Driver) Next() Fault {
	f := Fault{Kind: Kind(d.rng.IntN(int(numKinds)))}
	switch f.Kind {
	case KillLeader, KillFollower:
		f.For = time.Duration(200+d.rng.IntN(1800)) * time.Millisecond
	default:
		f.For = time.Duration(9500+d.rng.IntN(2500)) * time.Millisecond
	}
	return f
}

// Inject makes the fault f on the node that has f's role now, and sets
// f.Node and f.At. Which follower is hit is drawn from the seed too.
func (d *Driver) Inject(ctx context.Context, f *Fault) error {
	// A leader may step down after a heal (2.9 does, now and then, once a
	// frozen peer is back): the fault waits for the next one.
	if err := d.Cluster.WaitCurrent(ctx, d.stream); err != nil {
		return fmt.Errorf("natschaos: before %s: %w", f.Kind, err)
	}
	si, err := d.Cluster.Stream(ctx, d.stream)
	if err != nil {
		return fmt.Errorf("natschaos: stream %s: %w", d.stream, err)
	}
	if si.Leader == "" || len(si.Followers) == 0 {
		return fmt.Errorf("natschaos: stream %s has leader %q and followers %v", d.stream, si.Leader, si.Followers)
	}
	f.Node = si.Leader
	if f.Kind == KillFollower || f.Kind == PauseFollower {
		f.Node = si.Followers[d.rng.IntN(len(si.Followers))]
	}
	n := d.Cluster.Node(f.Node)
	if n == nil {
		return fmt.Errorf("natschaos: no node %q", f.Node)
	}
	f.At = time.Now()
	d.logf("natschaos: %s %s for %v", f.Kind, f.Node, f.For)
	switch f.Kind {
	case KillLeader, KillFollower:
		n.Kill()
		return nil
	case PauseLeader, PauseFollower:
		return n.Pause()
	}
	return fmt.Errorf("natschaos: unknown fault %v", f.Kind)
}

// Heal repairs the fault f once its time is up, and waits until the
// stream is whole.
func (d *Driver) Heal(ctx context.Context, f Fault) error {
	t := time.NewTimer(time.Until(f.At.Add(f.For)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	n := d.Cluster.Node(f.Node)
	switch f.Kind {
	case KillLeader, KillFollower:
		if err := n.Start(ctx); err != nil {
			return err
		}
	case PauseLeader, PauseFollower:
		if err := n.Resume(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("natschaos: unknown fault %v", f.Kind)
	}
	if err := d.Cluster.WaitCurrent(ctx, d.stream); err != nil {
		return fmt.Errorf("natschaos: after %s of %s: %w", f.Kind, f.Node, err)
	}
	return nil
}

// Run injects f, heals it, and measures the unavailability: the time from
// the fault to the first success of probe, called again and again from
// the fault on.
func (d *Driver) Run(ctx context.Context, f *Fault, probe func(context.Context) error) (time.Duration, error) {
	if err := d.Inject(ctx, f); err != nil {
		return 0, err
	}
	return chaos.Unavailable(ctx, f.At, func(ctx context.Context) error { return d.Heal(ctx, *f) }, probe)
}

// Stop kills the cluster's nodes.
func (d *Driver) Stop() { d.Cluster.Stop() }
