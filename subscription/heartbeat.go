package subscription

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/varve-go/varve"
)

// HeartbeatPrefix begins the names of the leases by which a running
// consumer says that it runs: HeartbeatPrefix, the consumer's name (its
// checkpoint's), "/" and the process's own id.
const HeartbeatPrefix = "heartbeat/"

// DefaultHeartbeat is the default of [Config.Heartbeat].
const DefaultHeartbeat = 2 * time.Second

// SeenPrefix begins the key of the record of when a process last ran a
// consumer: SeenPrefix and the consumer's name, the snapshot of that
// (eventless) system stream, saved by a heartbeat every SeenBeats beats and
// when it stops; [LastSeen] reads it.
const SeenPrefix = "$seen-"

// SeenBeats is how many beats a heartbeat lets pass between two records of
// [LastSeen]: a consumer whose processes were killed is seen last at most
// this many beats before they stopped.
const SeenBeats = 5

// Heartbeat records, while the subscription runs, that a process runs it:
// a lease of the store's ([varve.LeaseStore]) renewed every
// Config.Heartbeat for three of them, which the stop it returns releases.
// [Run], a delivery dispatcher and a projection runner call it; a reader
// that calls Next itself may too. It does nothing on a store without
// leases, or with Config.Heartbeat negative. A beat that fails is tried
// again at the next one. On a store with snapshots it also records when it
// last beat ([LastSeen]).
func (s *Subscription) Heartbeat(ctx context.Context) (stop func()) {
	every := s.cfg.Heartbeat
	if every == 0 {
		every = DefaultHeartbeat
	}
	if every < 0 || !s.store.Capabilities().Leases {
		return func() {}
	}
	ttl := min(max(3*every, varve.MinLeaseTTL), varve.MaxLeaseTTL)
	holder := fmt.Sprintf("%s-%d", processID(), beats.Add(1))
	name := HeartbeatPrefix + s.cfg.Name + "/" + holder
	leases := s.store.Leases()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		var held varve.Lease
		var seen time.Time
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			// Seen first: a process that shows as running was recorded.
			if now := time.Now(); now.Sub(seen) >= SeenBeats*every && s.saveSeen(ctx, now) == nil {
				seen = now
			}
			if l, err := leases.Acquire(ctx, name, holder, ttl); err == nil {
				held = l
			}
			select {
			case <-ctx.Done():
				rctx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if held.Token == 0 {
					// A first beat cut short by the stop may have been
					// stored all the same: take the lease to release it.
					held, _ = leases.Acquire(rctx, name, holder, ttl)
				}
				if held.Token != 0 {
					_ = s.saveSeen(rctx, time.Now())
					_ = leases.Release(rctx, held)
				}
				done()
				return
			case <-t.C:
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// saveSeen records that a process ran the subscription at t.
func (s *Subscription) saveSeen(ctx context.Context, t time.Time) error {
	if !s.store.Capabilities().Snapshots {
		return nil
	}
	return s.store.Snapshots().Save(ctx, varve.Snapshot{Stream: SeenPrefix + s.cfg.Name, Version: 1, SchemaVersion: 1, Data: []byte(`{}`), TakenAt: t})
}

// LastSeen returns when a process last ran the consumer name, as its
// heartbeats recorded it (every [SeenBeats] beats, and when it stopped);
// ok is false when none did, or the store keeps no snapshots. A consumer
// that does not run now ([Running]) stopped at about that time.
func LastSeen(ctx context.Context, store *varve.Store, name string) (t time.Time, ok bool, err error) {
	if !store.Capabilities().Snapshots {
		return time.Time{}, false, nil
	}
	snap, ok, err := store.Snapshots().Load(ctx, SeenPrefix+name)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("subscription %q: last seen: %w", name, err)
	}
	return snap.TakenAt, ok, nil
}

// Running returns the heartbeats of the processes that run the consumer
// name now ([Subscription.Heartbeat]): leases not expired, one per
// process. A store without leases gives an error wrapping
// varve.ErrNotSupported.
func Running(ctx context.Context, store *varve.Store, name string) ([]varve.Lease, error) {
	prefix := HeartbeatPrefix + name + "/"
	all, err := store.Leases().List(ctx, prefix)
	if err != nil {
		if errors.Is(err, varve.ErrNotSupported) {
			return nil, err
		}
		return nil, fmt.Errorf("subscription %q: heartbeats: %w", name, err)
	}
	out := all[:0]
	for _, l := range all {
		// Not those of a consumer whose name goes on after name's
		// ("<name>/segment/0-of-4").
		if !strings.Contains(strings.TrimPrefix(l.Name, prefix), "/") {
			out = append(out, l)
		}
	}
	return out, nil
}

// beats tells apart the heartbeats of one process.
var beats atomic.Int64

// processID names this process among the holders of heartbeats: its
// host, its pid and a random part (pids repeat across hosts and boots).
var processID = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	host = strings.NewReplacer("/", "_", " ", "_").Replace(host)
	if len(host) > 24 {
		host = host[:24]
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
})
