package aggregate_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/schema"
)

// requestCounter is a backend that counts its server round trips (NATS).
type requestCounter interface{ Requests() uint64 }

// TestSnapshotsInCommits runs the repository on the backends that keep
// snapshots in commits (NATS): a save keeps a small state in its commit,
// a load reads it with the events after it, and a load and a save cost two
// requests; anything else that writes to the stream, a larger state, another
// schema version or the policy turned off falls back to the saved
// snapshots and the events, with the same states.
func TestSnapshotsInCommits(t *testing.T) {
	t.Parallel()
	for _, k := range teststore.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			b := k.Backend(t)
			if _, ok := b.(varve.CommitSnapshotStore); !ok {
				t.Skipf("backend %q keeps no snapshots in commits", b.Features().Name)
			}
			s, err := varve.New(b, varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			var suffix [4]byte
			rand.Read(suffix[:])
			e := &env{store: s, cat: "acct" + hex.EncodeToString(suffix[:])}
			if !s.Capabilities().SnapshotsInCommits {
				t.Fatal("the store does not offer the backend's snapshots in commits")
			}
			repo := func(cfg aggregate.Config, schema int) *aggregate.Repository[Account] {
				def := accountDef(e.cat)
				def.SchemaVersion = schema
				r, err := aggregate.New(s, def, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			want := func(r *aggregate.Repository[Account], id string, n int) {
				t.Helper()
				a, err := r.Load(ctxFor(t), id)
				if err != nil || a.State() != (Account{Balance: 5 * n, Ops: n}) || a.Version() != varve.Version(n) {
					t.Fatalf("load %s: %+v at v%d, %v; want %d deposits of 5", id, a.State(), a.Version(), err, n)
				}
			}

			t.Run("every save keeps the state", func(t *testing.T) {
				r := repo(aggregate.Config{SnapshotEvery: 10}, 1)
				const n = 25
				for range n {
					mustExecute(t, r, "a", deposit(5))
				}
				st := r.Stats()
				if st.SnapshotsSaved != n || st.SnapshotsLoaded != n-1 || st.EventsReplayed != 0 {
					t.Fatalf("stats after %d executes: %+v; want a snapshot saved by each and loaded by all but the first, no events replayed", n, st)
				}
				if rc, ok := b.(requestCounter); ok {
					before := rc.Requests()
					mustExecute(t, r, "a", deposit(5))
					if got := rc.Requests() - before; got != 2 {
						t.Fatalf("a load and a save took %d requests, want 2", got)
					}
				}
				want(r, "a", n+1)
			})

			t.Run("an append of another writer", func(t *testing.T) {
				r := repo(aggregate.Config{SnapshotEvery: 10}, 1)
				for range 3 {
					mustExecute(t, r, "b", deposit(5))
				}
				ev, _, err := accountEvents.Encode(schema.JSON{}, Deposited{Amount: 5})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Append(ctxFor(t), r.Stream("b"), varve.Exact(3), ev); err != nil {
					t.Fatal(err)
				}
				before := r.Stats()
				want(r, "b", 4)
				if st := r.Stats(); st.SnapshotsLoaded != before.SnapshotsLoaded || st.EventsReplayed != before.EventsReplayed+4 {
					t.Fatalf("stats %+v after %+v: want every event replayed, no snapshot", st, before)
				}
				mustExecute(t, r, "b", deposit(5))
				want(r, "b", 5)
			})

			t.Run("a truncated stream", func(t *testing.T) {
				r := repo(aggregate.Config{SnapshotEvery: 10}, 1)
				for range 5 {
					mustExecute(t, r, "t", deposit(5))
				}
				for _, before := range []varve.Version{3, 100} {
					if err := s.Truncate(ctxFor(t), r.Stream("t"), before); err != nil {
						t.Fatal(err)
					}
					want(r, "t", 5)
				}
				mustExecute(t, r, "t", deposit(5))
				want(r, "t", 6)
			})

			t.Run("a state larger than the bound", func(t *testing.T) {
				r := repo(aggregate.Config{SnapshotEvery: 4, SnapshotInCommitMax: 8}, 1)
				for range 10 {
					mustExecute(t, r, "c", deposit(5))
				}
				if st := r.Stats(); st.SnapshotsSaved != 2 {
					t.Fatalf("stats %+v: want the saved snapshots of every 4 events, 2", st)
				}
				before := r.Stats()
				want(r, "c", 10)
				if st := r.Stats(); st.SnapshotsLoaded != before.SnapshotsLoaded+1 || st.EventsReplayed != before.EventsReplayed+2 {
					t.Fatalf("stats %+v after %+v: want the snapshot at 8 and 2 events", st, before)
				}
			})

			t.Run("a state the codec cannot encode", func(t *testing.T) {
				def := accountDef(e.cat)
				def.Codec = stateFails{}
				r, err := aggregate.New(s, def, aggregate.Config{SnapshotEvery: 2})
				if err != nil {
					t.Fatal(err)
				}
				for range 4 {
					mustExecute(t, r, "f", deposit(5))
				}
				if st := r.Stats(); st.SnapshotErrors != 4 || st.SnapshotsSaved != 0 || st.Saves != 4 {
					t.Fatalf("stats %+v: want 4 saves and one snapshot error each", st)
				}
				want(r, "f", 4)
			})

			t.Run("turned off", func(t *testing.T) {
				r := repo(aggregate.Config{SnapshotEvery: 4, SnapshotInCommitMax: -1}, 1)
				for range 9 {
					mustExecute(t, r, "d", deposit(5))
				}
				if st := r.Stats(); st.SnapshotsSaved != 2 {
					t.Fatalf("stats %+v: want 2 saved snapshots", st)
				}
				want(r, "d", 9)
			})

			t.Run("another schema version", func(t *testing.T) {
				r := repo(aggregate.Config{SnapshotEvery: 10}, 1)
				for range 3 {
					mustExecute(t, r, "e", deposit(5))
				}
				r2 := repo(aggregate.Config{SnapshotEvery: 10}, 2)
				want(r2, "e", 3)
				if st := r2.Stats(); st.SnapshotsIgnored != 1 || st.EventsReplayed != 3 {
					t.Fatalf("stats %+v: want the snapshot ignored and 3 events replayed", st)
				}
				mustExecute(t, r2, "e", deposit(5))
				want(r2, "e", 4)
			})
		})
	}
}

// stateFails is JSON that cannot encode an Account (a state), only events.
type stateFails struct{ schema.JSON }

func (c stateFails) Marshal(v any) ([]byte, error) {
	if _, ok := v.(Account); ok {
		return nil, errors.New("stateFails: no states")
	}
	return c.JSON.Marshal(v)
}
