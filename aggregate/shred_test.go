package aggregate_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/schema"
	"github.com/varve-go/varve/shred"
)

type Profile struct {
	Name  string `json:"name"`
	Edits int    `json:"edits"`
}

type Renamed struct {
	Name string `json:"name"`
}

var profileEvents = func() *schema.Registry {
	r := schema.NewRegistry()
	schema.Register[Renamed](r, "Renamed")
	return r
}()

// TestSealedAggregate: with a Sealer, a repository seals its events and
// snapshots with the subject's key; after the erasure of the subject the
// snapshot is passed over, the events decode as zero events and the
// cache forgets the state: loads go on, with no plaintext.
func TestSealedAggregate(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t)
			b := be.open(t)
			if _, ok := varve.As[varve.KeyStore](b); !ok {
				_ = b.Close()
				t.Skipf("%s keeps no keys", be.name)
			}
			m, err := shred.NewMasterKey("m1", bytes.Repeat([]byte{3}, 32))
			if err != nil {
				t.Fatal(err)
			}
			sh, err := shred.New(b, shred.Config{Master: m})
			if err != nil {
				t.Fatal(err)
			}
			store, err := varve.New(b, varve.Config{Opener: sh})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			cat := "prof" + hex.EncodeToString(binary.AppendUvarint(nil, rand.Uint64()))
			subject := cat + "-subject"
			r, err := aggregate.New(store, aggregate.Definition[Profile]{Category: cat, Events: profileEvents, SchemaVersion: 1,
				Apply: func(p Profile, e any) Profile {
					if e, ok := e.(Renamed); ok {
						p.Name = e.Name
					}
					p.Edits++
					return p
				}},
				aggregate.Config{SnapshotEvery: 2, CacheSize: 10, Sealer: sh, Subject: func(string) string { return subject }})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"Ada Byron", "Ada Lovelace", "Ada King"} {
				if _, err := r.Execute(ctx, "p1", func(a *aggregate.Aggregate[Profile]) error { return a.Raise(Renamed{Name: name}) }); err != nil {
					t.Fatal(err)
				}
			}
			for e, err := range store.ReadStream(ctx, r.Stream("p1"), varve.Sealed()) {
				if err != nil || bytes.Contains(e.Data, []byte("Ada")) {
					t.Fatalf("a stored event: %q %v", e.Data, err)
				}
			}
			if store.Capabilities().Snapshots {
				if snap, ok, err := store.Snapshots().Load(ctx, r.Stream("p1")); err != nil || ok && bytes.Contains(snap.Data, []byte("Ada")) {
					t.Fatalf("the stored snapshot: %q %v", snap.Data, err)
				}
			}
			a, err := r.Load(ctx, "p1", aggregate.FromStore())
			if err != nil || a.State().Name != "Ada King" || a.State().Edits != 3 {
				t.Fatalf("load before the erasure: %+v %v", a.State(), err)
			}

			if _, err := sh.Erase(ctx, store, subject, shred.EraseOptions{}); err != nil {
				t.Fatal(err)
			}
			r.ForgetSubject(subject)
			a, err = r.Load(ctx, "p1")
			if err != nil {
				t.Fatalf("load after the erasure: %v", err)
			}
			if st := a.State(); st.Name != "" || st.Edits != 3 || a.Version() != 3 {
				t.Fatalf("state after the erasure: %+v at %d", st, a.Version())
			}
		})
	}
}
