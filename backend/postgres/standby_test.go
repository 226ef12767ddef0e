package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/postgres"
	"github.com/varve-go/varve/internal/pgcluster"
	"github.com/varve-go/varve/subscription"
)

// startStandby starts a private primary and a streaming hot standby of it,
// or skips the test loudly (fails it with CI=true) where the PostgreSQL
// binaries are missing.
func startStandby(t *testing.T) (primary, standby *pgcluster.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hint := "Install PostgreSQL's server binaries (initdb, pg_basebackup) or set VARVE_PG_BINDIR."
	primary, err := pgcluster.Start(ctx, pgcluster.Config{})
	if err != nil {
		pgcluster.Unavailable(t, "private PostgreSQL primary", err, hint)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	standby, err = primary.StartStandby(ctx)
	if err != nil {
		pgcluster.Unavailable(t, "PostgreSQL hot standby (pg_basebackup)", err, hint)
	}
	t.Cleanup(func() { _ = standby.Stop() }) // before the primary's
	return primary, standby
}

// openStandby opens the schema on the standby once the standby has
// replayed its creation.
func openStandby(t *testing.T, cfg postgres.Config) *postgres.Backend {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := postgres.New(ctx, cfg)
		cancel()
		if err == nil {
			t.Cleanup(func() { _ = b.Close() })
			return b
		}
		if !errors.Is(err, postgres.ErrStandby) || time.Now().After(deadline) {
			t.Fatalf("open the schema on the standby: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStandby reads a store from a hot standby while the primary takes
// appends: a subscription on the standby (checkpoints kept on the primary)
// and a read of $all from the standby see every acknowledged event once,
// in the primary's order, with no gap; writes to the standby fail with
// ErrStandby. The delay from an append's acknowledgement on the primary to
// its delivery on the standby, and the standby's replay status, are
// logged.
func TestStandby(t *testing.T) {
	primary, standby := startStandby(t)
	const schema = "standby"
	pb := open(t, postgres.Config{ConnString: primary.URL(), Schema: schema})
	ps, err := varve.New(pb, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sb := openStandby(t, postgres.Config{ConnString: standby.URL(), Schema: schema, WatchPoll: 5 * time.Millisecond})
	ss, err := varve.New(sb, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("refused", func(t *testing.T) {
		if _, err := ps.Append(ctx, "order-1", varve.NoStream, varve.Event{Type: "T", Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		missing, err := postgres.New(ctx, postgres.Config{ConnString: standby.URL(), Schema: "never_created"})
		if err == nil {
			missing.Close()
		}
		cases := []struct {
			name string
			err  error
		}{
			{"open a schema the primary does not have", err},
			{"append", func() error {
				_, err := ss.Append(ctx, "order-2", varve.Any, varve.Event{Type: "T", Data: []byte("x")})
				return err
			}()},
			{"delete", ss.Delete(ctx, "order-1", varve.Any)},
			{"save a checkpoint", ss.Checkpoints().Save(ctx, "c", varve.Position{Commit: 1})},
		}
		for _, c := range cases {
			if !errors.Is(c.err, postgres.ErrStandby) {
				t.Errorf("%s on the standby: %v, want ErrStandby", c.name, c.err)
			}
		}
		st, err := pb.StandbyStatus(ctx)
		if err != nil || st.Standby {
			t.Errorf("primary's StandbyStatus: %+v, %v; want Standby false", st, err)
		}
	})

	// The subscription keeps its checkpoint on the primary: the standby
	// cannot write one.
	sub, err := subscription.Open(ctx, ss, subscription.Config{Name: "standby-reader", Start: subscription.FromBeginning, Checkpoints: pb})
	if err != nil {
		t.Fatal(err)
	}

	writers, appends := 4, 150
	if testing.Short() {
		appends = 40
	}
	type ack struct {
		pos varve.Position
		at  time.Time
	}
	var (
		mu    sync.Mutex
		acked = map[uuid.UUID]ack{}
	)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			version := varve.Version(0)
			for i := range appends {
				evs := make([]varve.Event, 1+i%3)
				for j := range evs {
					evs[j] = varve.Event{ID: varve.NewEventID(), Type: "T", Data: fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i)}
				}
				res, err := ps.Append(ctx, fmt.Sprintf("order-w%d", w), varve.Exact(version), evs...)
				if err != nil {
					t.Errorf("writer %d: append %d: %v", w, i, err)
					stopLoad() // the subscription would wait for events that never come
					return
				}
				version = res.LastVersion
				at := time.Now()
				mu.Lock()
				for _, e := range evs {
					acked[e.ID] = ack{res.Position, at}
				}
				mu.Unlock()
			}
		})
	}

	// The standby's replay status, sampled while the writers append.
	var statuses []postgres.StandbyStatus
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
			st, err := sb.StandbyStatus(ctx)
			if err != nil {
				t.Errorf("standby status: %v", err)
				return
			}
			statuses = append(statuses, st)
		}
	}()

	// The subscription reads until it has every acknowledged event; the
	// writers' total is known in advance, so it knows when to stop.
	want := 0
	for i := range appends {
		want += writers * (1 + i%3)
	}
	const first = 1 // the event of the refused subtest
	var (
		got     []varve.RecordedEvent
		seenAt  = map[uuid.UUID]time.Time{}
		through varve.Position
	)
	for len(got) < want+first {
		b, err := sub.Next(loadCtx)
		if err != nil {
			wg.Wait()
			close(stopSampling)
			<-sampled
			t.Fatalf("subscription on the standby after %d events: %v", len(got), err)
		}
		now := time.Now()
		for _, e := range b.Events {
			if len(got) > 0 && !got[len(got)-1].Position.Less(e.Position) {
				t.Fatalf("subscription: %s at %s after %s", e.ID, e.Position, got[len(got)-1].Position)
			}
			got = append(got, e)
			seenAt[e.ID] = now
		}
		through = b.Through
		if err := sub.SaveCheckpoint(ctx, through); err != nil {
			t.Fatalf("save the checkpoint on the primary: %v", err)
		}
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	if t.Failed() {
		return
	}

	// Every acknowledged event once, in the primary's order; the standby's
	// $all, read whole, is the primary's.
	primaryAll := readWhole(ctx, t, ps)
	standbyAll := readWhole(ctx, t, ss)
	if len(primaryAll) != want+first || len(got) != len(primaryAll) || len(standbyAll) != len(primaryAll) {
		t.Fatalf("primary $all %d events, standby $all %d, subscription %d; %d appended", len(primaryAll), len(standbyAll), len(got), want+first)
	}
	for i, e := range primaryAll {
		if got[i].ID != e.ID || got[i].Position != e.Position || standbyAll[i].ID != e.ID || standbyAll[i].Position != e.Position {
			t.Fatalf("event %d: primary %s at %s, subscription %s at %s, standby $all %s at %s",
				i, e.ID, e.Position, got[i].ID, got[i].Position, standbyAll[i].ID, standbyAll[i].Position)
		}
		if i >= first {
			if a, ok := acked[e.ID]; !ok || a.pos.Less(e.Position) {
				t.Fatalf("event %d (%s at %s) was not acknowledged at or after its position (%v)", i, e.ID, e.Position, a.pos)
			}
		}
	}
	if pos, ok, err := pb.LoadCheckpoint(ctx, "standby-reader"); err != nil || !ok || pos != through {
		t.Fatalf("checkpoint on the primary: %s, %v, %v; want %s", pos, ok, err, through)
	}

	var delays []time.Duration
	for id, a := range acked {
		delays = append(delays, seenAt[id].Sub(a.at))
	}
	slices.Sort(delays)
	var worst time.Duration
	for _, st := range statuses {
		if !st.Standby {
			t.Fatalf("standby status says the standby is not one: %+v", st)
		}
		worst = max(worst, st.SinceReplayedCommit)
	}
	last, err := sb.StandbyStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events appended by %d writers on the primary, all delivered once and in order on the standby; acknowledgement to delivery on the standby: median %v, 90th %v, max %v (WatchPoll 5ms on the standby)",
		len(delays), writers, delays[len(delays)/2], delays[len(delays)*9/10], delays[len(delays)-1])
	t.Logf("standby status, %d samples during the load: worst now()-last replayed commit %v; at the end: received %s, replayed %s",
		len(statuses), worst, last.ReceiveLSN, last.ReplayLSN)
}

func readWhole(ctx context.Context, t *testing.T, s *varve.Store) []varve.RecordedEvent {
	t.Helper()
	var out []varve.RecordedEvent
	for e, err := range s.ReadAll(ctx, varve.Start) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}
