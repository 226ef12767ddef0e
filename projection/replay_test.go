package projection_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/subscription"
)

// TestReplayParked: a replay request makes the runner apply its parked
// events again through the handler, as Batch.Parked batches at the
// checkpoint, each stream in order; what the handler takes is resolved,
// a stream stops at its first failure with the later events held behind
// it, the checkpoint does not move back, and the control stream records
// the outcome.
func TestReplayParked(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, base projection.Config) {
		ctx := context.Background()
		good := appendN(t, s, "cnt", "Counted", 4, 2)
		bad1 := appendN(t, s, "bad", "Bad", 1, 1)[0] // bad-0
		bad2 := appendN(t, s, "worse", "Bad", 2, 1)  // worse-0, twice
		var mu sync.Mutex
		healed := map[uuid.UUID]bool{}
		var applied []uuid.UUID
		var parkedAt []varve.Position // the Through of each Parked batch
		handle := func(_ context.Context, b projection.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range b.Events {
				if e.Type == "Bad" && !healed[e.ID] {
					return errors.New("boom " + e.ID.String())
				}
			}
			if b.Parked {
				parkedAt = append(parkedAt, b.Through)
			}
			for _, e := range b.Events {
				applied = append(applied, e.ID)
			}
			return nil
		}
		heal := func(ids ...uuid.UUID) {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				healed[id] = true
			}
		}
		appliedNow := func() []uuid.UUID {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(applied)
		}
		r, err := projection.NewRunner(s, projection.Projection{Name: "rp", Version: 1, Handle: handle},
			with(base, projection.Config{ControlPoll: 10 * time.Millisecond, Poison: projection.Park,
				Retry: subscription.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}}))
		if err != nil {
			t.Fatal(err)
		}
		cpName := projection.CheckpointName("rp", 1)
		parked := delivery.NewParked(s, cpName)
		stop := start(t, r)
		defer stop()
		waitFor(t, "the good events handled and the bad ones parked", func() bool {
			l, err := parked.List(ctx)
			return err == nil && len(l) == 3 && len(appliedNow()) == len(good)
		})
		waitFor(t, "the checkpoint at the head", func() bool {
			head, err := s.LastPosition(ctx)
			cp, ok, err2 := s.Checkpoints().Load(ctx, cpName)
			return err == nil && err2 == nil && ok && cp == head
		})
		cpBefore, _, err := s.Checkpoints().Load(ctx, cpName)
		if err != nil {
			t.Fatal(err)
		}
		outcome := func(req varve.Version) *projection.Replay {
			c, err := projection.ReadControl(ctx, s, "rp")
			if err != nil {
				t.Fatal(err)
			}
			rp := c.Replays[cpName]
			if rp == nil || rp.Pending || rp.Request < req {
				return nil
			}
			return rp
		}

		// The first event of worse-0 still fails: it stays parked and its
		// second is held behind it; bad-0 is applied and resolved.
		heal(bad1, bad2[1])
		req, err := projection.ReplayParked(ctx, s, cpName, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var rp *projection.Replay
		waitFor(t, "the first replay carried out", func() bool { rp = outcome(req); return rp != nil })
		if rp.Replayed != 1 || rp.Failed != 2 || rp.Error == "" {
			t.Errorf("first replay: %+v, want 1 replayed and 2 failed with the error", rp)
		}
		if got := appliedNow(); !slices.Equal(got[len(good):], []uuid.UUID{bad1}) {
			t.Errorf("applied after the good events %v, want only %s", got[len(good):], bad1)
		}
		if l, err := parked.List(ctx); err != nil || len(l) != 2 || l[0].EventID != bad2[0] || l[1].EventID != bad2[1] {
			t.Errorf("still parked: %+v %v, want both events of worse-0", l, err)
		}

		// A replay of the one stream, now healed, applies both in order.
		heal(bad2[0])
		if _, err := projection.ReplayParked(ctx, s, "no-projection", nil, nil); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("replay of a name that is no projection's checkpoint: %v, want ErrInvalidArgument", err)
		}
		req, err = projection.ReplayParked(ctx, s, cpName, []string{"worse-0"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the second replay carried out", func() bool { rp = outcome(req); return rp != nil })
		if rp.Replayed != 2 || rp.Failed != 0 {
			t.Errorf("second replay: %+v, want 2 replayed", rp)
		}
		if got := appliedNow(); !slices.Equal(got[len(good):], []uuid.UUID{bad1, bad2[0], bad2[1]}) {
			t.Errorf("applied after the good events %v, want %s then worse-0 in order", got[len(good):], bad1)
		}
		if l, err := parked.List(ctx); err != nil || len(l) != 0 {
			t.Errorf("still parked: %+v %v, want none", l, err)
		}
		// Each Parked batch was at the checkpoint, which only moves on over
		// the log (the control stream's and the parked stream's records).
		mu.Lock()
		if len(parkedAt) != 3 {
			t.Errorf("%d batches had Parked set, want 3", len(parkedAt))
		}
		for _, p := range parkedAt {
			if p.Less(cpBefore) {
				t.Errorf("a Parked batch at %v, before the checkpoint %v", p, cpBefore)
			}
		}
		mu.Unlock()
		if cp, _, err := s.Checkpoints().Load(ctx, cpName); err != nil || cp.Less(cpBefore) {
			t.Errorf("checkpoint %v %v after the replays, before %v", cp, err, cpBefore)
		}
		if info, err := projection.Inspect(ctx, s, "rp"); err != nil || info.Parked != 0 || info.Versions[0].ReplayPending {
			t.Errorf("inspect: %+v %v, want nothing parked or pending", info, err)
		}
	})
}

// TestInspectSegments: the parked events of a segmented version's
// segments, and a replay asked of one of them, count for the version.
func TestInspectSegments(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store, _ projection.Config) {
		ctx := context.Background()
		cp := projection.CheckpointName("seg", 1)
		if err := s.Checkpoints().Save(ctx, subscription.SegmentName(cp, 0, 2), varve.Start); err != nil {
			t.Fatal(err)
		}
		if err := s.Checkpoints().Save(ctx, cp+"-origin", varve.Start); err != nil {
			t.Fatal(err)
		}
		ids := appendN(t, s, "poison", "Bad", 3, 1)
		var pes []delivery.ParkedEvent
		for e, err := range s.ReadStream(ctx, "poison-0") {
			if err != nil {
				t.Fatal(err)
			}
			pes = append(pes, delivery.ParkedEvent{Stream: e.Stream, Version: e.Version, Position: e.Position, EventID: e.ID, Type: e.Type,
				Reason: delivery.ReasonExhausted, Error: "boom", ParkedAt: time.Now().UTC()})
		}
		if len(pes) != len(ids) {
			t.Fatalf("read %d events, appended %d", len(pes), len(ids))
		}
		seg0, seg1 := subscription.SegmentName(cp, 0, 2), subscription.SegmentName(cp, 1, 2)
		for sub, evs := range map[string][]delivery.ParkedEvent{seg0: pes[:2], seg1: pes[2:]} {
			for i := range evs {
				evs[i].Subscription = sub
			}
			if _, err := delivery.NewParked(s, sub).Park(ctx, evs...); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := projection.ReplayParked(ctx, s, seg1, nil, nil); err != nil {
			t.Fatal(err)
		}
		info, err := projection.Inspect(ctx, s, "seg")
		if err != nil || len(info.Versions) != 1 {
			t.Fatalf("inspect: %+v %v", info, err)
		}
		want := 0
		if s.Capabilities().ListStreams {
			want = 3
		}
		if v := info.Versions[0]; v.Parked != want || info.Parked != int64(want) || !v.ReplayPending {
			t.Errorf("version %+v (projection parked %d), want %d parked and a replay pending", v, info.Parked, want)
		}
	})
}
