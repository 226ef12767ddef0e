package nats

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// TestLeaseRequests counts the server requests of lease calls: a renewal
// and a save of a checkpoint the lease fences already cost what they cost
// before the fence was atomic; registering a checkpoint costs one
// compare-and-set of the lease entry, and a new holder's Acquire two
// requests per fenced checkpoint and one to mark the fence done.
func TestLeaseRequests(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		if m.noBatch {
			t.Skip("leases do not use batched gets")
		}
		b := m.open(t, testConfig(m.url, uniqueName("leasereqs")))
		ctx := ctxT(t)
		count := func(t *testing.T, what string, want uint64, fn func() error) {
			t.Helper()
			before := b.Requests()
			if err := fn(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := b.Requests() - before; got != want {
				t.Fatalf("%s: %d requests, want %d", what, got, want)
			}
		}
		var a, nb varve.Lease
		acquire := func(l *varve.Lease, name, holder string) func() error {
			return func() (err error) {
				*l, err = b.AcquireLease(ctx, name, holder, time.Minute)
				return err
			}
		}
		save := func(l *varve.Lease, cp string, seq uint64) func() error {
			return func() error { return b.SaveCheckpointFenced(ctx, cp, varve.Position{Seq: seq}, l.Name, l.Token) }
		}
		// The bucket is opened once per backend (1 to look it up, 1 to create it).
		count(t, "first acquire, new bucket", 4, acquire(&a, "l", "a"))
		count(t, "renewal", 2, acquire(&a, "l", "a"))
		count(t, "first fenced save of a checkpoint", 4, save(&a, "cp", 1))
		count(t, "steady fenced save", 3, save(&a, "cp", 2))
		count(t, "renewal of a lease that fences a checkpoint", 2, acquire(&a, "l", "a"))
		count(t, "release", 2, func() error { return b.ReleaseLease(ctx, "l", "a", a.Token) })
		count(t, "new holder's acquire, one checkpoint fenced", 5, acquire(&nb, "l", "b"))
		count(t, "new holder's steady save", 3, save(&nb, "cp", 3))
		count(t, "acquire of a lease that fences nothing", 2, acquire(&a, "other", "a"))
	})
}

// TestLeaseIncompleteFence: an Acquire that set a new token and failed
// before its fence was complete (simulated by writing its lease entry) is
// completed by the holder's next Acquire, a renewal, before that returns:
// the checkpoint then stores the new token, so a save of the old holder
// that read the entry before the new token was set cannot land.
func TestLeaseIncompleteFence(t *testing.T) {
	forModes(t, func(t *testing.T, m mode) {
		if m.noBatch {
			t.Skip("leases do not use batched gets")
		}
		b := m.open(t, testConfig(m.url, uniqueName("leasefence")))
		ctx := ctxT(t)
		a, err := b.AcquireLease(ctx, "l", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.SaveCheckpointFenced(ctx, "cp", varve.Position{Seq: 5}, "l", a.Token); err != nil {
			t.Fatal(err)
		}
		kv, err := b.bucket(ctx, b.cfg.CheckpointBucket, &b.ckpts, false)
		if err != nil {
			t.Fatal(err)
		}
		dead := leaseValue{holder: "b", token: a.Token + 1, expires: time.Now().Add(time.Minute).UnixNano(), names: []string{"cp"}, fenced: a.Token}
		if _, err := kv.Put(ctx, leaseKeyPrefix+"l", dead.encode()); err != nil {
			t.Fatal(err)
		}
		got, err := b.AcquireLease(ctx, "l", "b", time.Minute)
		if err != nil || got.Token != dead.token {
			t.Fatalf("renewal: %+v %v, want token %d", got, err, dead.token)
		}
		want := fmt.Sprintf("%s\t%d", varve.Position{Seq: 5}, dead.token)
		if e, err := kv.Get(ctx, "cp"); err != nil || string(e.Value()) != want {
			t.Fatalf("checkpoint after the renewal: %q %v, want %q", e.Value(), err, want)
		}
		e, err := kv.Get(ctx, leaseKeyPrefix+"l")
		if err != nil {
			t.Fatal(err)
		}
		if l, err := decodeLease(e.Value()); err != nil || l.fenced != dead.token {
			t.Fatalf("lease entry after the renewal: %+v %v, want fenced through %d", l, err, dead.token)
		}
		err = b.SaveCheckpointFenced(ctx, "cp", varve.Position{Seq: 6}, "l", a.Token)
		if !errors.Is(err, varve.ErrLeaseLost) {
			t.Fatalf("old holder's save: %v, want ErrLeaseLost", err)
		}
	})
}

// TestLeaseFenceBound: a lease fences at most maxFenced checkpoints; one
// more is refused with ErrInvalidArgument and saves nothing.
func TestLeaseFenceBound(t *testing.T) {
	b := open(t, testConfig(embeddedURL, uniqueName("leasebound")))
	ctx := ctxT(t)
	l, err := b.AcquireLease(ctx, "l", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxFenced + 1 {
		name := fmt.Sprintf("cp/%d", i)
		err := b.SaveCheckpointFenced(ctx, name, varve.Position{Seq: 1}, "l", l.Token)
		if i < maxFenced && err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		if i == maxFenced {
			if !errors.Is(err, varve.ErrInvalidArgument) {
				t.Fatalf("save %d: %v, want ErrInvalidArgument", i, err)
			}
			if _, ok, err := b.LoadCheckpoint(ctx, name); ok || err != nil {
				t.Fatalf("refused checkpoint: found %v, %v", ok, err)
			}
		}
	}
}

// TestDecodeLease: entries of three parts (written before the fence was
// atomic) fence nothing and are complete; five parts carry the fence.
func TestDecodeLease(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want leaseValue
		bad  bool
	}{
		{in: "a\n7\n100", want: leaseValue{holder: "a", token: 7, expires: 100, fenced: 7}},
		{in: "\n7\n0", want: leaseValue{token: 7, fenced: 7}},
		{in: "a\n8\n100\ncp x=2Fy\n7", want: leaseValue{holder: "a", token: 8, expires: 100, names: []string{"cp", "x=2Fy"}, fenced: 7}},
		{in: "a\n8\n100\n\n8", want: leaseValue{holder: "a", token: 8, expires: 100, fenced: 8}},
		{in: "a\n8\n100\ncp", bad: true},
		{in: "a\n8\n100\ncp\nx", bad: true},
		{in: "a\nx\n100", bad: true},
	} {
		got, err := decodeLease([]byte(tc.in))
		if tc.bad != (err != nil) {
			t.Errorf("decode %q: error %v, want bad=%v", tc.in, err, tc.bad)
			continue
		}
		if !tc.bad && (got.holder != tc.want.holder || got.token != tc.want.token || got.expires != tc.want.expires ||
			!slices.Equal(got.names, tc.want.names) || got.fenced != tc.want.fenced) {
			t.Errorf("decode %q: %+v, want %+v", tc.in, got, tc.want)
		}
		if !tc.bad {
			if again, err := decodeLease(got.encode()); err != nil || !slices.Equal(again.names, got.names) || again.fenced != got.fenced || again.token != got.token {
				t.Errorf("round trip of %q: %+v %v", tc.in, again, err)
			}
		}
	}
}
