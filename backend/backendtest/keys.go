package backendtest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// testKeys holds key stores to their promise: one key per subject, agreed
// on by racing creators; a deletion names the key it means and leaves its
// successor alone; listing in subject order with paging; rewrapping only
// of the key and master it names; bad input refused.
func testKeys(t *testing.T, f Factory) {
	s := store(t, f)
	ctx := ctxFor(t)
	pfx := prefix(t)
	keys := s.Keys()
	if lacks(t, f, s, varve.Capabilities{Keys: true}) {
		_, err := keys.Get(ctx, pfx+"s")
		wantErr(t, "a key without the capability", err, varve.ErrNotSupported)
		t.Skipf("%s keeps no keys", s.Features().Name)
	}
	mk := func(subject string, b byte) varve.WrappedKey {
		return varve.WrappedKey{Subject: subject, ID: uuid.New(), Master: "m1", Wrapped: bytes.Repeat([]byte{b}, 60)}
	}
	_, err := keys.Get(ctx, pfx+"none")
	wantErr(t, "get of a subject without a key", err, varve.ErrKeyNotFound)

	// Racing creators agree on one key.
	subject := pfx + "racer"
	const racers = 8
	got := make([]varve.WrappedKey, racers)
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() { got[i], errs[i] = keys.Put(ctx, mk(subject, byte(i+1))) })
	}
	wg.Wait()
	for i := range racers {
		if errs[i] != nil {
			t.Fatalf("racing put %d: %v", i, errs[i])
		}
		if got[i].ID != got[0].ID || !bytes.Equal(got[i].Wrapped, got[0].Wrapped) {
			t.Fatalf("racing puts disagree: %+v and %+v", got[i], got[0])
		}
	}
	k, err := keys.Get(ctx, subject)
	if err != nil || k.ID != got[0].ID || !bytes.Equal(k.Wrapped, got[0].Wrapped) || k.Master != "m1" || k.Subject != subject || k.Created.IsZero() {
		t.Fatalf("get after the race: %+v %v, want %+v", k, err, got[0])
	}

	// A deletion of another id does nothing; of the key's id, deletes it,
	// and a new key is another.
	if ok, err := keys.Delete(ctx, subject, uuid.New()); ok || err != nil {
		t.Fatalf("delete of another id: %v %v", ok, err)
	}
	if ok, err := keys.Delete(ctx, subject, k.ID); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	_, err = keys.Get(ctx, subject)
	wantErr(t, "get after delete", err, varve.ErrKeyNotFound)
	if ok, err := keys.Delete(ctx, subject, k.ID); ok || err != nil {
		t.Fatalf("second delete: %v %v", ok, err)
	}
	next, err := keys.Put(ctx, mk(subject, 0xEE))
	if err != nil || next.ID == k.ID || next.Wrapped[0] != 0xEE {
		t.Fatalf("put after delete: %+v %v", next, err)
	}
	if ok, err := keys.Delete(ctx, subject, k.ID); ok || err != nil {
		t.Fatalf("delete of the old id after a new key: %v %v", ok, err)
	}

	// Rewrap only the key and master named.
	re := next
	re.Master, re.Wrapped = "m2", bytes.Repeat([]byte{0xAB}, 60)
	if ok, err := keys.Rewrap(ctx, re, "m0"); ok || err != nil {
		t.Fatalf("rewrap with the wrong old master: %v %v", ok, err)
	}
	other := re
	other.ID = uuid.New()
	if ok, err := keys.Rewrap(ctx, other, "m1"); ok || err != nil {
		t.Fatalf("rewrap of another id: %v %v", ok, err)
	}
	if ok, err := keys.Rewrap(ctx, re, "m1"); !ok || err != nil {
		t.Fatalf("rewrap: %v %v", ok, err)
	}
	if k, err := keys.Get(ctx, subject); err != nil || k.Master != "m2" || !bytes.Equal(k.Wrapped, re.Wrapped) || k.ID != next.ID {
		t.Fatalf("get after rewrap: %+v %v", k, err)
	}

	// Listing in subject order, paged.
	lp := pfx + "list-"
	var want []string
	for i := range 5 {
		sub := fmt.Sprintf("%s%02d", lp, 4-i)
		if _, err := keys.Put(ctx, mk(sub, byte(i+1))); err != nil {
			t.Fatal(err)
		}
		want = append([]string{sub}, want...)
	}
	var listed []string
	after := lp
	for {
		page, err := keys.List(ctx, after, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page {
			if k.Subject > lp+"\xff" {
				page = nil
				break
			}
			listed = append(listed, k.Subject)
			after = k.Subject
		}
		if len(page) < 2 {
			break
		}
	}
	if fmt.Sprint(listed) != fmt.Sprint(want) {
		t.Fatalf("listed %v, want %v", listed, want)
	}

	for _, tc := range []struct {
		name string
		k    varve.WrappedKey
	}{
		{"empty subject", varve.WrappedKey{ID: uuid.New(), Master: "m", Wrapped: []byte{1}}},
		{"no id", varve.WrappedKey{Subject: pfx + "x", Master: "m", Wrapped: []byte{1}}},
		{"no master", varve.WrappedKey{Subject: pfx + "x", ID: uuid.New(), Wrapped: []byte{1}}},
		{"nothing wrapped", varve.WrappedKey{Subject: pfx + "x", ID: uuid.New(), Master: "m"}},
		{"too long", varve.WrappedKey{Subject: pfx + "x", ID: uuid.New(), Master: "m", Wrapped: make([]byte, varve.MaxWrappedKeyLen+1)}},
	} {
		_, err := keys.Put(ctx, tc.k)
		wantErr(t, "put with "+tc.name, err, varve.ErrInvalidArgument)
	}
}
