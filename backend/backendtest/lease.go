package backendtest

import (
	"errors"
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
	if !leases.Supported() {
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
	if cps := s.Checkpoints(); cps.Supported() {
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
