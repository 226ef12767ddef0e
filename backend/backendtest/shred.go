package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/shred"
)

// testShredding holds crypto-shredding to its promise on a backend that
// keeps keys: writers seal events of several subjects in racing appends
// (from Shredders of their own, as separate processes would) while one
// subject is erased; afterwards every event of the erased subject reads as
// erased through every read ($all, its stream, a sealed read still holds
// the ciphertext), every other event opens to its plaintext, and events,
// versions and positions are all still there.
func testShredding(t *testing.T, f Factory) {
	b := f.New(t)
	s0, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if lacks(t, f, s0, varve.Capabilities{Keys: true}) {
		_ = s0.Close()
		t.Skipf("%s keeps no keys", s0.Features().Name)
	}
	_ = s0.Close()
	b = f.New(t)
	ctx := ctxFor(t)
	pfx := prefix(t)
	master, err := shred.NewMasterKey("conformance", bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	newShredder := func() *shred.Shredder {
		sh, err := shred.New(b, shred.Config{Master: master})
		if err != nil {
			t.Fatal(err)
		}
		return sh
	}
	sh := newShredder()
	s, err := varve.New(b, varve.Config{Opener: sh})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	const writers, rounds, subjects = 4, 15, 3
	subject := func(i int) string { return fmt.Sprintf("%ssubject-%d", pfx, i) }
	victim := subject(0)
	var erased atomic.Bool
	var acked newest
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Go(func() {
			mine := newShredder()
			for r := range rounds {
				subj := subject((w + r) % subjects)
				ev, err := mine.Seal(ctx, subj, varve.NewEvent("Personal", fmt.Appendf(nil, "plain %s %d %d", subj, w, r)))
				var res varve.AppendResult
				if err == nil {
					res, err = s.Append(ctx, fmt.Sprintf("%sw%d", pfx, w), varve.Any, ev)
				}
				if err != nil {
					errs <- err
					return
				}
				acked.add(res)
			}
		})
	}
	wg.Go(func() {
		// Erase once the victim has events.
		for !erased.Load() {
			if _, err := sh.Erase(ctx, s, victim, shred.EraseOptions{}); err == nil {
				erased.Store(true)
			} else if !errors.Is(err, shred.ErrNothingToErase) {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Events sealed for the victim after its erasure carry a new key and
	// open; those sealed before it read as erased. Each writer's Shredder
	// may have sealed with the erased key in its cache (CacheTTL): those
	// read as erased too. Nothing reads as the plaintext of an erased key.
	reader := newShredder()
	seen, opened, gone := 0, 0, 0
	for w := range writers {
		stream := fmt.Sprintf("%sw%d", pfx, w)
		var sealed [][]byte
		for e, err := range s.ReadStream(ctx, stream, varve.Sealed()) {
			if err != nil {
				t.Fatal(err)
			}
			if !shred.IsSealed(e.Data) || bytes.Contains(e.Data, []byte("plain")) {
				t.Fatalf("%s@%d is stored in the clear: %q", stream, e.Version, e.Data)
			}
			sealed = append(sealed, e.Data)
		}
		v := 0
		for e, err := range s.ReadStream(ctx, stream) {
			if err != nil {
				t.Fatal(err)
			}
			v++
			if e.Version != varve.Version(v) {
				t.Fatalf("%s: version %d at %d", stream, e.Version, v)
			}
			subj := shred.Subject(sealed[v-1])
			again, err := reader.OpenBytes(ctx, sealed[v-1])
			if err != nil || !bytes.Equal(again, e.Data) {
				t.Fatalf("%s@%d opens as %q through the store and %q (%v) through another Shredder", stream, v, e.Data, again, err)
			}
			if who, ok := shred.Erased(e.Data); ok {
				if who != victim || subj != victim {
					t.Fatalf("%s@%d of %s reads as erased for %q", stream, v, subj, who)
				}
				gone++
				continue
			}
			want := fmt.Sprintf("plain %s %d", subj, w)
			if !bytes.HasPrefix(e.Data, []byte(want)) {
				t.Fatalf("%s@%d opens as %q, want %q...", stream, v, e.Data, want)
			}
			opened++
		}
		seen += v
	}
	if seen != writers*rounds || gone == 0 || opened == 0 {
		t.Fatalf("%d events (%d opened, %d erased), want %d with both kinds", seen, opened, gone, writers*rounds)
	}
	// $all holds the same events, opened: none in the clear of an erased key.
	// It may hold acknowledged appends back a while (PostgreSQL's horizon,
	// behind a writer of another test).
	acked.wait(t, s)
	n := 0
	for e, err := range s.ReadAll(ctx, varve.Start) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(e.Stream, pfx) {
			if shred.IsSealed(e.Data) {
				t.Fatalf("$all returns %s@%d sealed", e.Stream, e.Version)
			}
			n++
		}
	}
	if n != seen {
		t.Fatalf("$all holds %d of the %d events", n, seen)
	}
}
