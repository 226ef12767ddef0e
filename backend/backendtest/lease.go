package backendtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// testLeases holds leases to their promise on backends that keep them: one
// holder at a time, renewals keep the token, every new holder or term gets
// a greater one, a released or expired lease can be taken, and a
// checkpoint fenced by an old token is refused once a newer holder exists.
func testLeases(t *testing.T, f Factory) {
	s := store(t, f)
	ctx := ctxFor(t)
	pfx := prefix(t)
	leases := s.Leases()
	if lacks(t, f, s, varve.Capabilities{Leases: true}) {
		_, err := leases.Acquire(ctx, pfx+"l", "a", time.Second)
		wantErr(t, "a lease without the capability", err, varve.ErrNotSupported)
		_, err = leases.List(ctx, pfx)
		wantErr(t, "a list without the capability", err, varve.ErrNotSupported)
		t.Skipf("%s keeps no leases", s.Features().Name)
	}
	name := pfx + "lease"
	a, err := leases.Acquire(ctx, name, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = leases.Acquire(ctx, name, "b", time.Minute)
	wantErr(t, "acquire of a held lease", err, varve.ErrLeaseHeld)
	var held *varve.LeaseHeldError
	if !errors.As(err, &held) || held.Holder != "a" {
		t.Fatalf("the error does not name the holder: %v", err)
	}
	renewed, err := leases.Acquire(ctx, name, "a", time.Minute)
	if err != nil || renewed.Token != a.Token || renewed.Expires.Before(a.Expires) {
		t.Fatalf("renewal: %+v %v, after %+v", renewed, err, a)
	}
	if err := leases.SaveCheckpoint(ctx, pfx+"cp", varve.Position{Seq: 1}, a); err != nil {
		t.Fatalf("save fenced by the holder's token: %v", err)
	}
	if err := leases.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	b, err := leases.Acquire(ctx, name, "b", time.Minute)
	if err != nil || b.Token <= a.Token {
		t.Fatalf("acquire after release: %+v %v (old token %d)", b, err, a.Token)
	}
	err = leases.SaveCheckpoint(ctx, pfx+"cp", varve.Position{Seq: 2}, a)
	wantErr(t, "save fenced by an old token", err, varve.ErrLeaseLost)
	if err := leases.SaveCheckpoint(ctx, pfx+"cp", varve.Position{Seq: 3}, b); err != nil {
		t.Fatal(err)
	}
	if cps := s.Checkpoints(); s.Capabilities().Checkpoints {
		pos, ok, err := cps.Load(ctx, pfx+"cp")
		if err != nil || !ok || pos != (varve.Position{Seq: 3}) {
			t.Fatalf("checkpoint after fenced saves: %v %v %v, want 3", pos, ok, err)
		}
	}
	// A release by someone else, or with an old token, changes nothing.
	if err := leases.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	_, err = leases.Acquire(ctx, name, "c", time.Minute)
	wantErr(t, "acquire after a stale release", err, varve.ErrLeaseHeld)

	// Expiry, by the backend's clock: the lease can be taken by another
	// holder, and the same holder's next term has a new token.
	short := pfx + "short"
	x, err := leases.Acquire(ctx, short, "x", varve.MinLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * varve.MinLeaseTTL) // past the expiry; the test asserts no duration
	y, err := leases.Acquire(ctx, short, "y", time.Minute)
	if err != nil || y.Token <= x.Token {
		t.Fatalf("acquire of an expired lease: %+v %v", y, err)
	}
	z, err := leases.Acquire(ctx, pfx+"term", "z", varve.MinLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * varve.MinLeaseTTL)
	z2, err := leases.Acquire(ctx, pfx+"term", "z", time.Minute)
	if err != nil || z2.Token <= z.Token {
		t.Fatalf("a new term of the same holder: %+v %v after %+v", z2, err, z)
	}

	// Of holders racing for a free lease, exactly one wins.
	race := pfx + "race"
	var mu sync.Mutex
	var wins []string
	var wg sync.WaitGroup
	for _, h := range []string{"h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8"} {
		wg.Go(func() {
			_, err := leases.Acquire(ctx, race, h, time.Minute)
			switch {
			case err == nil:
				mu.Lock()
				wins = append(wins, h)
				mu.Unlock()
			case !errors.Is(err, varve.ErrLeaseHeld):
				t.Errorf("racing acquire: %v", err)
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d holders won the race: %v", len(wins), wins)
	}

	// The live leases by prefix, in name order: released and expired ones
	// are not listed, and a prefix is a prefix, not a pattern.
	if err := leases.Release(ctx, y); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prefix string
		want   []varve.Lease
	}{
		{pfx, []varve.Lease{{Name: name, Holder: "b", Token: b.Token}, {Name: race, Holder: wins[0]}, {Name: pfx + "term", Holder: "z", Token: z2.Token}}},
		{pfx + "r", []varve.Lease{{Name: race, Holder: wins[0]}}},
		{pfx + "%", nil},
		{pfx + "_ace", nil},
		{pfx + "racer", nil},
	} {
		got, err := leases.List(ctx, tc.prefix)
		if err != nil {
			t.Fatalf("list %q: %v", tc.prefix, err)
		}
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			w := tc.want[i]
			ok = got[i].Name == w.Name && got[i].Holder == w.Holder && (w.Token == 0 || got[i].Token == w.Token) && got[i].Expires.After(time.Now())
		}
		if !ok {
			t.Fatalf("list %q: %+v, want %+v", tc.prefix, got, tc.want)
		}
	}
	_, err = leases.List(ctx, "a\x00")
	wantErr(t, "list with a NUL in the prefix", err, varve.ErrInvalidArgument)

	for _, tc := range []struct {
		name, holder string
		ttl          time.Duration
	}{
		{"", "a", time.Second}, {pfx + "l", "", time.Second}, {pfx + "l", "a", time.Millisecond}, {pfx + "l", "a", 48 * time.Hour},
	} {
		_, err := leases.Acquire(ctx, tc.name, tc.holder, tc.ttl)
		wantErr(t, "bad lease request", err, varve.ErrInvalidArgument)
	}
}

// testLeaseFence holds the fence of checkpoints to its promise, on backends
// that keep leases: once a newer holder's Acquire returned, a save with an
// older token is refused and the checkpoint stays as it was; a save in
// flight during that Acquire lands before the Acquire returns or not at
// all. The old and the new holder use backends of their own over the same
// data, as two processes would.
func testLeaseFence(t *testing.T, f Factory) {
	sa := store(t, f)
	if !sa.Capabilities().Leases || !sa.Capabilities().Checkpoints {
		t.Skipf("%s keeps no leases or no checkpoints", sa.Features().Name)
	}
	ctx := ctxFor(t)
	pfx := prefix(t)
	mustAppend(t, sa, pfx+"s", varve.NoStream, events("E", 1)...)
	bb, err := reopen(t, f, sa, pfx+"s")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := varve.New(bb, varve.Config{})
	if err != nil {
		t.Fatalf("varve.New: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	la, lb := sa.Leases(), sb.Leases()

	t.Run("Deterministic", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			expire bool // A lets its lease expire instead of releasing it
			saved  bool // A saved the checkpoint before B acquired the lease
		}{
			{"released", false, true},
			{"expired", true, true},
			{"released/first save after", false, false},
			{"expired/first save after", true, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				id := prefix(t)
				lease, cp := id+"lease", id+"cp"
				ttl := time.Minute
				if tc.expire {
					ttl = varve.MinLeaseTTL
				}
				a, err := la.Acquire(ctx, lease, "a", ttl)
				if err != nil {
					t.Fatal(err)
				}
				if tc.saved {
					if err := la.SaveCheckpoint(ctx, cp, varve.Position{Seq: 1}, a); err != nil {
						t.Fatalf("save with the holder's token: %v", err)
					}
				}
				if !tc.expire {
					if err := la.Release(ctx, a); err != nil {
						t.Fatal(err)
					}
				}
				b := acquireWhenFree(t, lb, lease, "b")
				if b.Token <= a.Token {
					t.Fatalf("new holder's token %d, old %d", b.Token, a.Token)
				}
				err = la.SaveCheckpoint(ctx, cp, varve.Position{Seq: 2}, a)
				wantErr(t, "save with the old holder's token", err, varve.ErrLeaseLost)
				pos, ok, err := sb.Checkpoints().Load(ctx, cp)
				if err != nil || ok != tc.saved || (tc.saved && pos != varve.Position{Seq: 1}) {
					t.Fatalf("checkpoint after a refused save: %v %v %v, want saved=%v at 1", pos, ok, err, tc.saved)
				}
				if err := lb.SaveCheckpoint(ctx, cp, varve.Position{Seq: 3}, b); err != nil {
					t.Fatalf("save with the new holder's token: %v", err)
				}
				if pos, ok, err := sa.Checkpoints().Load(ctx, cp); err != nil || !ok || pos != (varve.Position{Seq: 3}) {
					t.Fatalf("checkpoint after the new holder's save: %v %v %v, want 3", pos, ok, err)
				}
			})
		}
	})

	// A saves in a loop while B takes the lease over; what B loads right
	// after its Acquire returned must be the checkpoint for good, whatever
	// the interleaving. Every fourth trial lets A's lease expire.
	t.Run("Race", func(t *testing.T) {
		const trials = 32
		failed := 0
		for i := range trials {
			if !raceTrial(t, la, lb, sb.Checkpoints(), fmt.Sprintf("%srace-%d-", pfx, i), i%4 == 3) {
				failed++
			}
		}
		if failed > 0 {
			t.Errorf("%d of %d trials: an old holder's save landed after the new holder's Acquire returned", failed, trials)
		}
	})
}

// raceTrial is one trial of the race: A saves with increasing positions
// until it is refused or stopped, while its lease is released (or expires)
// and B acquires it and loads the checkpoint. It reports whether the
// checkpoint stayed what B loaded.
func raceTrial(t *testing.T, la, lb varve.Leases, cps varve.Checkpoints, id string, expire bool) bool {
	t.Helper()
	ctx := ctxFor(t)
	lease, cp := id+"lease", id+"cp"
	ttl := time.Minute
	if expire {
		ttl = varve.MinLeaseTTL
	}
	a, err := la.Acquire(ctx, lease, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	stop, first := make(chan struct{}), make(chan struct{})
	var loop sync.WaitGroup
	var loopErr error
	loop.Go(func() {
		for n := uint64(1); ; n++ {
			err := la.SaveCheckpoint(ctx, cp, varve.Position{Seq: n}, a)
			if n == 1 {
				close(first)
			}
			if err != nil {
				if !errors.Is(err, varve.ErrLeaseLost) {
					loopErr = err
				}
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			loop.Wait()
		}
	}()
	<-first
	if !expire {
		if err := la.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	b := acquireWhenFree(t, lb, lease, "b")
	seen, seenOK, err := cps.Load(ctx, cp)
	stopped = true
	close(stop)
	loop.Wait()
	if err != nil || loopErr != nil {
		t.Fatalf("%s: load %v, saves %v", id, err, loopErr)
	}
	if b.Token <= a.Token {
		t.Fatalf("%s: new holder's token %d, old %d", id, b.Token, a.Token)
	}
	pos, ok, err := cps.Load(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if pos != seen || ok != seenOK {
		t.Errorf("%s (expired %v): the new holder loaded %v (found %v) after its Acquire, then the old holder's save made it %v",
			id, expire, seen, seenOK, pos)
		return false
	}
	return true
}

// acquireWhenFree acquires lease for holder once its holder released it or
// let it expire, by the backend's clock.
func acquireWhenFree(t testing.TB, leases varve.Leases, lease, holder string) varve.Lease {
	t.Helper()
	ctx := ctxFor(t)
	for {
		l, err := leases.Acquire(ctx, lease, holder, time.Minute)
		if err == nil {
			return l
		}
		if !errors.Is(err, varve.ErrLeaseHeld) {
			t.Fatalf("acquire %q for %q: %v", lease, holder, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("acquire %q for %q: still held when the test's deadline passed: %v", lease, holder, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
