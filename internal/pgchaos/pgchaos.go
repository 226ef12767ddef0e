// Package pgchaos breaks a PostgreSQL primary and its standby on purpose,
// for tests that prove what varve keeps under faults (issue #39).
//
// A [Driver] runs two private clusters of [pgcluster]: a primary and a
// standby started from it, with the primary's settings
// ([pgcluster.Synchronous] for no loss, [pgcluster.Asynchronous] to show
// loss). Clients use [Driver.URL], a multi-host URL with
// target_session_attrs=read-write, so that they reconnect to whichever node
// is the primary. [Driver.Inject] makes a fault chosen by the driver's
// seeded random source, and [Driver.Heal] repairs it:
//
//   - [FailOver]: SIGKILL of the primary and promotion of the standby;
//     healed by rejoining the old primary as the new one's standby (a fresh
//     pg_basebackup on its old port).
//   - [KillStandby]: SIGKILL of the standby; healed by restarting it. With a
//     synchronous standby, commits wait meanwhile.
//   - [PausePrimary]: SIGSTOP of the primary's processes; healed, after
//     the fault's pause, by SIGCONT.
//
// The seed is VARVE_CHAOS_SEED when set, else the clock's; the driver logs
// it, and the same seed replays the same faults. [Driver.Run] injects,
// heals and measures the unavailability: from the fault to the first
// success of a probe (an append through varve, say) started after it.
//
// A Driver is used by one goroutine.
package pgchaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/varve-go/varve/internal/chaos"
	"github.com/varve-go/varve/internal/pgcluster"
)

// Kind is a kind of fault.
type Kind int

const (
	FailOver Kind = iota
	KillStandby
	PausePrimary
	numKinds
)

func (k Kind) String() string {
	switch k {
	case FailOver:
		return "fail-over"
	case KillStandby:
		return "kill-standby"
	case PausePrimary:
		return "pause-primary"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is one injected fault.
type Fault struct {
	Kind Kind
	// Pause is how long a PausePrimary fault keeps the primary frozen.
	Pause time.Duration
	// At is when the fault was made.
	At time.Time
}

// Driver owns a primary and a standby and breaks them.
type Driver struct {
	// Seed is the seed of the fault schedule.
	Seed  int64
	nodes [2]*pgcluster.Cluster
	prim  int
	rng   *rand.Rand
	logf  func(format string, args ...any)
}

// SeedFromEnv returns VARVE_CHAOS_SEED, or the clock's nanoseconds.
func SeedFromEnv() (int64, error) { return chaos.SeedFromEnv() }

// Start starts a primary with cfg and a standby of it. logf (t.Logf, say)
// receives the seed and every fault.
func Start(ctx context.Context, cfg pgcluster.Config, seed int64, logf func(string, ...any)) (*Driver, error) {
	p, err := pgcluster.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s, err := p.StartStandby(ctx)
	if err != nil {
		_ = p.Stop()
		return nil, err
	}
	d := &Driver{Seed: seed, nodes: [2]*pgcluster.Cluster{p, s}, rng: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)), logf: logf}
	d.logf("pgchaos: seed %d (VARVE_CHAOS_SEED=%d replays), primary :%d, standby :%d", seed, seed, p.Port(), s.Port())
	return d, nil
}

// URL is the multi-host connection string of the "postgres" database.
func (d *Driver) URL() string { return pgcluster.MultiHostURL("postgres", d.nodes[0], d.nodes[1]) }

// Primary and Standby are the nodes in their current roles.
func (d *Driver) Primary() *pgcluster.Cluster { return d.nodes[d.prim] }
func (d *Driver) Standby() *pgcluster.Cluster { return d.nodes[1-d.prim] }

// Next draws the next fault from the seeded source.
func (d *Driver) Next() Fault {
	f := Fault{Kind: Kind(d.rng.IntN(int(numKinds)))}
	if f.Kind == PausePrimary {
		f.Pause = time.Duration(1+d.rng.IntN(4)) * time.Second
	}
	return f
}

// Inject makes the fault f and sets f.At.
func (d *Driver) Inject(ctx context.Context, f *Fault) error {
	f.At = time.Now()
	d.logf("pgchaos: %s (pause %v) at primary :%d", f.Kind, f.Pause, d.Primary().Port())
	switch f.Kind {
	case FailOver:
		d.Primary().Kill()
		if err := d.Standby().Promote(ctx); err != nil {
			return err
		}
		d.prim = 1 - d.prim
	case KillStandby:
		d.Standby().Kill()
	case PausePrimary:
		return d.Primary().Pause()
	default:
		return fmt.Errorf("pgchaos: unknown fault %v", f.Kind)
	}
	return nil
}

// Heal repairs the fault f, made by Inject: the node that went down comes
// back as the standby.
func (d *Driver) Heal(ctx context.Context, f Fault) error {
	switch f.Kind {
	case FailOver:
		return d.Standby().Rejoin(ctx, d.Primary())
	case KillStandby:
		return d.Standby().Restart(ctx, "immediate")
	case PausePrimary:
		t := time.NewTimer(time.Until(f.At.Add(f.Pause)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return d.Primary().Resume()
	}
	return fmt.Errorf("pgchaos: unknown fault %v", f.Kind)
}

// Run injects f, heals it, and measures the unavailability: the time from
// the fault to the first success of probe, which is called again and again
// (with a short pause after a failure) from the fault on, while the fault
// heals. probe gets a context that ends with ctx.
func (d *Driver) Run(ctx context.Context, f *Fault, probe func(context.Context) error) (time.Duration, error) {
	if err := d.Inject(ctx, f); err != nil {
		return 0, err
	}
	return chaos.Unavailable(ctx, f.At, func(ctx context.Context) error { return d.Heal(ctx, *f) }, probe)
}

// Stop stops both nodes and removes their directories.
func (d *Driver) Stop() error {
	for _, n := range d.nodes {
		if n.Running() {
			_ = n.Resume()
		}
	}
	// The standby first: a primary waits for its WAL senders to finish.
	return errors.Join(d.Standby().Stop(), d.Primary().Stop())
}
