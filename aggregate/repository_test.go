package aggregate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/schema"
)

func TestLoadSaveRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, cfg := range []aggregate.Config{{}, {SnapshotEvery: 3}, {CacheSize: 8}, {SnapshotEvery: 2, CacheSize: 8}} {
			t.Run(fmt.Sprintf("snap=%d,cache=%d", cfg.SnapshotEvery, cfg.CacheSize), func(t *testing.T) {
				r := newAccounts(t, e, cfg)
				id := fmt.Sprintf("rt-%d-%d", cfg.SnapshotEvery, cfg.CacheSize)
				if _, err := r.Load(ctxFor(t), id); !errors.Is(err, varve.ErrStreamNotFound) {
					t.Fatalf("load of a new aggregate: %v, want ErrStreamNotFound", err)
				}
				want := Account{}
				for i := 1; i <= 10; i++ {
					a := mustExecute(t, r, id, deposit(i))
					want = applyAccount(want, Deposited{Amount: i})
					if a.Version() != varve.Version(i) || a.State() != want || a.Pending() != 0 {
						t.Fatalf("after command %d: version %d state %+v pending %d, want %d %+v 0", i, a.Version(), a.State(), a.Pending(), i, want)
					}
				}
				if _, err := r.Execute(ctxFor(t), id, withdraw(1000)); !errors.Is(err, errInsufficient) {
					t.Fatalf("failing command: %v, want errInsufficient", err)
				}
				// A fresh repository reads the store; this one may use its cache.
				for _, rr := range []*aggregate.Repository[Account]{r, newAccounts(t, e, cfg)} {
					a, err := rr.Load(ctxFor(t), id)
					if err != nil || a.State() != want || a.Version() != 10 {
						t.Fatalf("load: %+v v%d err %v, want %+v v10", a.State(), a.Version(), err, want)
					}
				}
				if got := len(storedTypes(t, e.store, r.Stream(id))); got != 10 {
					t.Fatalf("%d events stored, want 10", got)
				}
			})
		}
	})
}

func TestSaveConflictDiscardsAggregate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := newAccounts(t, e, aggregate.Config{})
		mustExecute(t, r, "c", deposit(10))
		a, _ := r.Load(ctxFor(t), "c")
		b, _ := r.Load(ctxFor(t), "c")
		if err := a.Raise(Deposited{Amount: 1}); err != nil {
			t.Fatal(err)
		}
		if err := r.Save(ctxFor(t), a); err != nil {
			t.Fatal(err)
		}
		if err := b.Raise(Withdrawn{Amount: 5}, Deposited{Amount: 2}); err != nil {
			t.Fatal(err)
		}
		err := r.Save(ctxFor(t), b)
		var conflict *varve.WrongExpectedVersionError
		if !errors.As(err, &conflict) || conflict.Expected != varve.Exact(1) || conflict.Actual != 2 {
			t.Fatalf("stale save: %v, want a conflict expected 1 actual 2", err)
		}
		if b.Pending() != 0 {
			t.Fatalf("%d pending events kept after a failed save", b.Pending())
		}
		if err := b.Raise(Deposited{Amount: 3}); !errors.Is(err, aggregate.ErrDiscarded) {
			t.Fatalf("raise on a discarded aggregate: %v", err)
		}
		if err := r.Save(ctxFor(t), b); !errors.Is(err, aggregate.ErrDiscarded) {
			t.Fatalf("save of a discarded aggregate: %v", err)
		}
		if got := storedTypes(t, e.store, r.Stream("c")); len(got) != 2 {
			t.Fatalf("stored %v, want the two successful deposits only", got)
		}
		if s := r.Stats(); s.Conflicts != 1 || s.Saves != 2 {
			t.Fatalf("stats %+v, want 1 conflict and 2 saves", s)
		}
	})
}

func TestUnknownEventTypes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := newAccounts(t, e, aggregate.Config{})
		a, err := r.GetOrCreate(ctxFor(t), "u")
		if err != nil || a.Version() != 0 {
			t.Fatalf("get or create: v%d %v", a.Version(), err)
		}
		type Closed struct{}
		for _, ev := range []any{Closed{}, nil, (*Deposited)(nil), "text"} {
			err := a.Raise(Deposited{Amount: 1}, ev)
			if !errors.Is(err, schema.ErrUnknownEventType) {
				t.Fatalf("raise %T: %v, want ErrUnknownEventType", ev, err)
			}
			if a.Pending() != 0 || a.State() != (Account{}) {
				t.Fatalf("raise %T failed but kept %d events, state %+v", ev, a.Pending(), a.State())
			}
		}
		if err := a.Raise(&Deposited{Amount: 4}); err != nil {
			t.Fatalf("raise of a pointer to a registered type: %v", err)
		}
		if err := r.Save(ctxFor(t), a); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Append(ctxFor(t), r.Stream("u"), varve.Exact(1), varve.Event{Type: "AccountFrozen", Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		_, err = r.Load(ctxFor(t), "u")
		if !errors.Is(err, schema.ErrUnknownEventType) || !strings.Contains(err.Error(), `"AccountFrozen"`) || !strings.Contains(err.Error(), "version 2") {
			t.Fatalf("load with an unknown stored type: %v", err)
		}
	})
}

func TestRegisterPanicsOnMisuse(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]func(r *schema.Registry){
		"empty name":   func(r *schema.Registry) { schema.Register[Deposited](r, "") },
		"pointer type": func(r *schema.Registry) { schema.Register[*Deposited](r, "D") },
		"duplicate name": func(r *schema.Registry) {
			schema.Register[Deposited](r, "X")
			schema.Register[Withdrawn](r, "X")
		},
		"duplicate type": func(r *schema.Registry) {
			schema.Register[Deposited](r, "X")
			schema.Register[Deposited](r, "Y")
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f(schema.NewRegistry())
		})
	}
}

// upperCodec is a codec other than the default: JSON wrapped in a marker, so
// a payload written by it can't be read by plain JSON.
type upperCodec struct{ calls atomic.Int64 }

func (c *upperCodec) Marshal(v any) ([]byte, error) {
	c.calls.Add(1)
	b, err := schema.JSON{}.Marshal(v)
	return append([]byte("U:"), b...), err
}

func (c *upperCodec) Unmarshal(data []byte, v any) error {
	c.calls.Add(1)
	rest, ok := strings.CutPrefix(string(data), "U:")
	if !ok {
		return errors.New("not written by upperCodec")
	}
	return schema.JSON{}.Unmarshal([]byte(rest), v)
}

func TestPluggableCodec(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.needSnapshots(t)
		codec := &upperCodec{}
		def := accountDef(e.cat)
		def.Codec = codec
		r, err := aggregate.New(e.store, def, aggregate.Config{SnapshotEvery: 2})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			mustExecute(t, r, "k", deposit(5))
		}
		for _, got := range storedTypes(t, e.store, r.Stream("k")) {
			if got != `Deposited:U:{"amount":5}` {
				t.Fatalf("stored %s, want the codec's form", got)
			}
		}
		loaded := r.Stats().SnapshotsLoaded
		a, err := r.Load(ctxFor(t), "k")
		if err != nil || a.State().Balance != 15 {
			t.Fatalf("load: %+v %v", a.State(), err)
		}
		if s := r.Stats(); s.SnapshotsLoaded != loaded+1 || s.SnapshotErrors != 0 {
			t.Fatalf("stats %+v, want the snapshot read back by the codec", s)
		}
		if codec.calls.Load() == 0 {
			t.Fatal("codec never called")
		}
	})
}

// TestSnapshotPolicy checks that the policy decides what is read and
// written: with snapshots off the repository calls no snapshot method at all,
// even when a snapshot exists (the first bug of seed 001's library).
func TestSnapshotPolicy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const events = 40
		for _, tc := range []struct {
			every                         int
			wantSaves                     int64
			wantLoadEvents, wantSnapLoads int64
		}{
			{every: 0, wantSaves: 0, wantLoadEvents: events, wantSnapLoads: 0},
			{every: 1, wantSaves: events, wantLoadEvents: 0, wantSnapLoads: 1},
			{every: 10, wantSaves: events / 10, wantLoadEvents: 0, wantSnapLoads: 1},
			{every: 15, wantSaves: events / 15, wantLoadEvents: events % 15, wantSnapLoads: 1},
		} {
			t.Run(fmt.Sprintf("every=%d", tc.every), func(t *testing.T) {
				id := fmt.Sprintf("p%d", tc.every)
				if tc.every == 0 {
					e.needSnapshots(t)
					// A snapshot that a reader with snapshots on would use,
					// with a wrong state: a repository with them off must
					// not even look at it.
					ss := e.store.Backend().(varve.SnapshotStore)
					if err := ss.SaveSnapshot(ctxFor(t), varve.Snapshot{Stream: e.cat + "-" + id, Version: 1, SchemaVersion: 1, Data: []byte(`{"balance":999,"ops":1}`)}); err != nil {
						t.Fatal(err)
					}
				}
				r := newAccounts(t, e, aggregate.Config{SnapshotEvery: tc.every})
				before := e.b.counts()
				for range events {
					if err := saveOne(t, r, id); err != nil {
						t.Fatal(err)
					}
				}
				writes := e.b.counts().minus(before)
				if writes.snapSaves != tc.wantSaves {
					t.Fatalf("%d snapshots written over %d saves, want %d", writes.snapSaves, events, tc.wantSaves)
				}
				if tc.every == 0 && writes.snapLoads != 0 {
					t.Fatalf("snapshots off, but %d snapshot reads", writes.snapLoads)
				}
				before = e.b.counts()
				a, err := r.Load(ctxFor(t), id)
				read := e.b.counts().minus(before)
				if err != nil || a.State() != (Account{Balance: events, Ops: events}) || a.Version() != events {
					t.Fatalf("load: %+v v%d %v", a.State(), a.Version(), err)
				}
				if read.eventsRead != tc.wantLoadEvents || read.snapLoads != tc.wantSnapLoads {
					t.Fatalf("load read %d events and %d snapshots, want %d and %d", read.eventsRead, read.snapLoads, tc.wantLoadEvents, tc.wantSnapLoads)
				}
			})
		}
	})
}

// saveOne is the seed's cycle without the cache: get or create, raise, save.
func saveOne(t *testing.T, r *aggregate.Repository[Account], id string) error {
	a, err := r.GetOrCreate(ctxFor(t), id)
	if err != nil {
		return err
	}
	if err := a.Raise(Deposited{Amount: 1}); err != nil {
		return err
	}
	return r.Save(ctxFor(t), a)
}

func TestSnapshotsNeedASnapshotStore(t *testing.T) {
	t.Parallel()
	s, err := varve.New(noSnapshots{newEnv(t, backends[0].open(t)).b}, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aggregate.New(s, accountDef("x"), aggregate.Config{SnapshotEvery: 5}); !errors.Is(err, varve.ErrNotSupported) {
		t.Fatalf("snapshots on a backend without them: %v", err)
	}
	if _, err := aggregate.New(s, accountDef("x"), aggregate.Config{}); err != nil {
		t.Fatalf("snapshots off on a backend without them: %v", err)
	}
}

// noSnapshots hides every optional capability of the backend it wraps.
type noSnapshots struct{ varve.Backend }

// AccountV2 is a later schema of the account: the balance in cents, under
// the same JSON name. A v1 snapshot decodes into it without an error, and
// wrongly, so it must be ignored.
type AccountV2 struct {
	Balance int `json:"balance"` // cents
	Ops     int `json:"ops"`
}

func TestSnapshotOfAnotherSchemaIsIgnored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		v1 := newAccounts(t, e, aggregate.Config{SnapshotEvery: 4})
		for range 8 {
			mustExecute(t, v1, "s", deposit(3))
		}
		if s := v1.Stats(); s.SnapshotsSaved != 2 {
			t.Fatalf("v1 wrote %d snapshots, want 2", s.SnapshotsSaved)
		}
		v2, err := aggregate.New(e.store, aggregate.Definition[AccountV2]{
			Category: e.cat, Events: accountEvents, SchemaVersion: 2,
			Apply: func(s AccountV2, ev any) AccountV2 {
				switch ev := ev.(type) {
				case Deposited:
					s.Balance += 100 * ev.Amount
				case Withdrawn:
					s.Balance -= 100 * ev.Amount
				}
				s.Ops++
				return s
			},
		}, aggregate.Config{SnapshotEvery: 4})
		if err != nil {
			t.Fatal(err)
		}
		before := e.b.counts()
		a, err := v2.Load(ctxFor(t), "s")
		read := e.b.counts().minus(before)
		if err != nil || a.State() != (AccountV2{Balance: 2400, Ops: 8}) {
			t.Fatalf("v2 load: %+v %v, want balance 2400 cents", a.State(), err)
		}
		if s := v2.Stats(); s.SnapshotsIgnored != 1 || s.SnapshotsLoaded != 0 || read.eventsRead != 8 {
			t.Fatalf("v2 stats %+v, %d events read; want the v1 snapshot ignored and 8 events read", s, read.eventsRead)
		}
		// v2's next save replaces the snapshot at once; v2 then uses it.
		mustExecute(t, v2, "s", func(a *aggregate.Aggregate[AccountV2]) error { return a.Raise(Deposited{Amount: 1}) })
		a, err = v2.Load(ctxFor(t), "s")
		if err != nil || a.State().Balance != 2500 || v2.Stats().SnapshotsLoaded != 1 {
			t.Fatalf("v2 reload: %+v %v stats %+v", a.State(), err, v2.Stats())
		}
	})
}

func TestCacheHitReadsNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := newAccounts(t, e, aggregate.Config{CacheSize: 4, SnapshotEvery: 100})
		mustExecute(t, r, "h", deposit(7))
		before := e.b.counts()
		for range 5 {
			mustExecute(t, r, "h", deposit(1))
		}
		got := e.b.counts().minus(before)
		if got != (counts{appends: 5}) {
			t.Fatalf("five cached commands made calls %+v, want 5 appends and nothing else", got)
		}
		if s := r.Stats(); s.CacheHits != 5 || s.CacheMisses != 1 {
			t.Fatalf("stats %+v, want 5 hits and 1 miss", s)
		}
		// FromStore bypasses the cache.
		before = e.b.counts()
		a, err := r.Load(ctxFor(t), "h", aggregate.FromStore())
		if err != nil || a.State().Balance != 12 || e.b.counts().minus(before).reads == 0 {
			t.Fatalf("load from store: %+v %v", a.State(), err)
		}
	})
}

// TestFailedSaveLeavesNoEventsInCache is the second bug of seed 001's
// library: a cached aggregate kept the events of a failed save and a later
// save persisted them.
func TestFailedSaveLeavesNoEventsInCache(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		errDown := errors.New("injected: connection lost")
		for _, tc := range []struct {
			name string
			fail func(r *aggregate.Repository[Account]) // makes the next save fail
		}{
			{"backend error", func(*aggregate.Repository[Account]) {
				f := func(varve.AppendRequest) error { return errDown }
				e.b.failAppend.Store(&f)
			}},
			{"conflict", func(r *aggregate.Repository[Account]) {
				// A writer elsewhere (a repository without this cache).
				other := newAccounts(t, e, aggregate.Config{})
				mustExecute(t, other, "f-conflict", deposit(1000))
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := newAccounts(t, e, aggregate.Config{CacheSize: 16})
				id := "f-" + strings.ReplaceAll(tc.name, " ", "-")
				mustExecute(t, r, id, deposit(10))
				a, err := r.Load(ctxFor(t), id) // a cache hit
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Raise(Withdrawn{Amount: 9}); err != nil {
					t.Fatal(err)
				}
				tc.fail(r)
				if err := r.Save(ctxFor(t), a); err == nil {
					t.Fatal("save succeeded")
				}
				e.b.failAppend.Store(nil)
				mustExecute(t, r, id, deposit(1))
				got := storedTypes(t, e.store, r.Stream(id))
				for _, s := range got {
					if strings.HasPrefix(s, "Withdrawn") {
						t.Fatalf("the failed save's event was persisted later: %v", got)
					}
				}
				b, err := r.Load(ctxFor(t), id, aggregate.FromStore())
				if err != nil {
					t.Fatal(err)
				}
				c, _ := r.Load(ctxFor(t), id)
				if b.State() != c.State() || b.Version() != c.Version() || b.State().Balance < 11 {
					t.Fatalf("cached %+v v%d, stored %+v v%d", c.State(), c.Version(), b.State(), b.Version())
				}
			})
		}
	})
}

// TestConflictEvictsStaleCopy is the third bug of seed 001's library: a
// conflict never evicted the stale cached copy, so every retry failed.
func TestConflictEvictsStaleCopy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		// Two attempts: the stale cached one and one retry, which must
		// read the store.
		r := newAccounts(t, e, aggregate.Config{CacheSize: 16, MaxAttempts: 2})
		other := newAccounts(t, e, aggregate.Config{CacheSize: 16})
		mustExecute(t, r, "e", deposit(10))
		mustExecute(t, other, "e", deposit(5)) // r's cached copy is now stale
		before := e.b.counts()
		a := mustExecute(t, r, "e", withdraw(10))
		if a.State() != (Account{Balance: 5, Ops: 3}) || a.Version() != 3 {
			t.Fatalf("after retry: %+v v%d", a.State(), a.Version())
		}
		if got := e.b.counts().minus(before); got.appends != 2 || got.reads != 1 {
			t.Fatalf("calls %+v, want 2 appends (stale, retry) and 1 read", got)
		}
		if s := r.Stats(); s.Conflicts != 1 || s.Retries != 1 || s.Evictions != 1 {
			t.Fatalf("stats %+v, want one conflict, retry and eviction", s)
		}
		// A command that fails on a stale cached state is decided again on
		// the stored one.
		mustExecute(t, other, "e", deposit(20))
		a = mustExecute(t, r, "e", withdraw(25))
		if a.State().Balance != 0 || r.Stats().Rechecks != 1 {
			t.Fatalf("withdrawal decided on a stale copy: %+v, stats %+v", a.State(), r.Stats())
		}
		if _, err := r.Execute(ctxFor(t), "e", withdraw(1)); !errors.Is(err, errInsufficient) || r.Stats().Rechecks != 2 {
			t.Fatalf("withdrawal beyond the stored balance: %v, stats %+v", err, r.Stats())
		}

		// The retry's state is cached again: the next command reads nothing.
		before = e.b.counts()
		mustExecute(t, r, "e", deposit(2))
		if got := e.b.counts().minus(before); got != (counts{appends: 1}) {
			t.Fatalf("command after the retry made calls %+v", got)
		}
	})
}

func TestExecuteGivesUp(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := newAccounts(t, e, aggregate.Config{MaxAttempts: 4})
		f := func(req varve.AppendRequest) error {
			return &varve.WrongExpectedVersionError{Stream: req.Stream, Expected: req.Expected, Actual: 7}
		}
		e.b.failAppend.Store(&f)
		runs := 0
		_, err := r.Execute(ctxFor(t), "g", func(a *aggregate.Aggregate[Account]) error { runs++; return a.Raise(Deposited{Amount: 1}) })
		if !errors.Is(err, varve.ErrWrongExpectedVersion) || !strings.Contains(err.Error(), "gave up after 4 attempts") {
			t.Fatalf("execute against a store that always conflicts: %v", err)
		}
		if runs != 4 || e.b.appends.Load() != 4 {
			t.Fatalf("command ran %d times, %d appends; want 4 and 4", runs, e.b.appends.Load())
		}
	})
}

// TestConcurrentCommandsConverge runs conflicting commands on one aggregate
// from several repositories (as several processes would) and goroutines: all
// of them succeed through Execute's retries and the final state is the
// sequential result.
func TestConcurrentCommandsConverge(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const repos, goroutines, commands = 4, 3, 15
		cfgs := []aggregate.Config{{CacheSize: 8}, {}, {SnapshotEvery: 5, CacheSize: 8}, {SnapshotEvery: 3}}
		rs := make([]*aggregate.Repository[Account], repos)
		for i := range rs {
			cfgs[i].MaxAttempts = 1000
			rs[i] = newAccounts(t, e, cfgs[i])
		}
		// Every repository's first command waits until all have loaded
		// version 0, so at least repos-1 saves must conflict.
		var loaded sync.WaitGroup
		loaded.Add(repos)
		var wg sync.WaitGroup
		errs := make(chan error, repos*goroutines)
		for i, r := range rs {
			var first sync.Once
			for range goroutines {
				wg.Go(func() {
					for range commands {
						_, err := r.Execute(ctxFor(t), "hot", func(a *aggregate.Aggregate[Account]) error {
							first.Do(func() { loaded.Done(); loaded.Wait() })
							return a.Raise(Deposited{Amount: i + 1})
						})
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		want := Account{}
		var conflicts uint64
		for i, r := range rs {
			for range goroutines * commands {
				want = applyAccount(want, Deposited{Amount: i + 1})
			}
			conflicts += r.Stats().Conflicts
		}
		a, err := newAccounts(t, e, aggregate.Config{}).Load(ctxFor(t), "hot")
		if err != nil || a.State() != want || a.Version() != repos*goroutines*commands {
			t.Fatalf("final %+v v%d %v, want %+v v%d", a.State(), a.Version(), err, want, repos*goroutines*commands)
		}
		if conflicts < repos-1 {
			t.Fatalf("%d conflicts, want at least %d", conflicts, repos-1)
		}
		t.Logf("%d conflicts resolved by retries", conflicts)
	})
}

func TestExecuteSerializesOneAggregate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := newAccounts(t, e, aggregate.Config{CacheSize: 4})
		var inside, overlaps atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 20 {
					_, err := r.Execute(ctxFor(t), "one", func(a *aggregate.Aggregate[Account]) error {
						if inside.Add(1) > 1 {
							overlaps.Add(1)
						}
						defer inside.Add(-1)
						return a.Raise(Deposited{Amount: 1})
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if overlaps.Load() != 0 || r.Stats().Conflicts != 0 {
			t.Fatalf("%d overlapping commands, %d conflicts; want none", overlaps.Load(), r.Stats().Conflicts)
		}
		a, _ := r.Load(ctxFor(t), "one")
		if a.State().Balance != 160 {
			t.Fatalf("balance %d, want 160", a.State().Balance)
		}

		// A caller waiting for the lock gives up with its context.
		hold, release := make(chan struct{}), make(chan struct{})
		done := make(chan error)
		go func() {
			_, err := r.Execute(ctxFor(t), "one", func(*aggregate.Aggregate[Account]) error { close(hold); <-release; return nil })
			done <- err
		}()
		<-hold
		ctx, cancel := context.WithTimeout(ctxFor(t), 20*time.Millisecond)
		defer cancel()
		if _, err := r.Execute(ctx, "one", deposit(1)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("execute waiting for a held aggregate: %v", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestCachedStatesAreNotShared loads one cached aggregate from many
// goroutines and changes each copy with an apply function that appends to a
// slice and writes a map in place; the race detector fails the test if two
// copies share memory.
func TestCachedStatesAreNotShared(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, clone := range []bool{false, true} {
			t.Run(fmt.Sprintf("clone=%v", clone), func(t *testing.T) {
				def := aggregate.Definition[Cart]{Category: e.cat + "cart", Apply: applyCart, Events: cartEvents}
				if clone {
					def.Clone = cloneCart
				}
				r, err := aggregate.New(e.store, def, aggregate.Config{CacheSize: 4})
				if err != nil {
					t.Fatal(err)
				}
				id := fmt.Sprintf("cart-%v", clone)
				for _, item := range []string{"a", "b", "a"} {
					mustExecute(t, r, id, func(a *aggregate.Aggregate[Cart]) error { return a.Raise(ItemAdded{Item: item}) })
				}
				var wg sync.WaitGroup
				for g := range 6 {
					wg.Go(func() {
						for i := range 30 {
							a, err := r.Load(ctxFor(t), id)
							if err != nil {
								t.Error(err)
								return
							}
							item := fmt.Sprintf("g%d-%d", g, i)
							if err := a.Raise(ItemAdded{Item: item}, ItemAdded{Item: "a"}); err != nil {
								t.Error(err)
								return
							}
							if s := a.State(); len(s.Items) != 5 || s.Items[3] != item || s.Qty["a"] != 3 {
								t.Errorf("copy %+v", s)
								return
							}
						}
					})
				}
				wg.Wait()
				if s := r.Stats(); s.CacheHits < 180 {
					t.Fatalf("stats %+v, want every load a cache hit", s)
				}
			})
		}
	})
}

func TestSnapshotOfDeletedStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := newAccounts(t, e, aggregate.Config{SnapshotEvery: 5})
		for range 10 {
			mustExecute(t, r, "d", deposit(1))
		}
		if err := e.store.Delete(ctxFor(t), r.Stream("d"), varve.Any); err != nil {
			t.Fatal(err)
		}
		// The stream starts afresh; its old snapshot (version 10) is
		// still stored and is ahead of it.
		a := mustExecute(t, r, "d", deposit(100))
		if a.State() != (Account{Balance: 100, Ops: 1}) {
			t.Fatalf("first command after delete: %+v", a.State())
		}
		a = mustExecute(t, r, "d", deposit(1))
		if a.State() != (Account{Balance: 101, Ops: 2}) || a.Version() != 2 {
			t.Fatalf("second command after delete: %+v v%d, want balance 101 at v2", a.State(), a.Version())
		}
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends[0].open(t))
	good := accountDef("x")
	for name, tc := range map[string]struct {
		store *varve.Store
		def   aggregate.Definition[Account]
		cfg   aggregate.Config
	}{
		"nil store":      {nil, good, aggregate.Config{}},
		"no category":    {e.store, aggregate.Definition[Account]{Apply: applyAccount, Events: accountEvents}, aggregate.Config{}},
		"no apply":       {e.store, aggregate.Definition[Account]{Category: "x", Events: accountEvents}, aggregate.Config{}},
		"no registry":    {e.store, aggregate.Definition[Account]{Category: "x", Apply: applyAccount}, aggregate.Config{}},
		"negative cache": {e.store, good, aggregate.Config{CacheSize: -1}},
	} {
		if _, err := aggregate.New(tc.store, tc.def, tc.cfg); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestStreamsInTheirCategory: an aggregate's stream is its category, the
// store's category separator and its id, so that a filtered read of the
// category holds every aggregate of the kind, whatever the separator.
func TestStreamsInTheirCategory(t *testing.T) {
	t.Parallel()
	for _, sep := range []string{"-", "::", "/", "."} {
		t.Run(sep, func(t *testing.T) {
			s, err := varve.New(memory.New(), varve.Config{CategorySeparator: sep})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			e := &env{store: s, cat: "acct"}
			r := newAccounts(t, e, aggregate.Config{})
			ids := []string{"1", "a" + sep + "b", "-x"}
			for _, id := range ids {
				if want := "acct" + sep + id; r.Stream(id) != want {
					t.Fatalf("Stream(%q) = %q, want %q", id, r.Stream(id), want)
				}
				mustExecute(t, r, id, deposit(1))
				if got := s.Category(r.Stream(id)); got != "acct" {
					t.Fatalf("the category of %q is %q, want acct", r.Stream(id), got)
				}
			}
			var got []string
			for ev, err := range s.ReadAll(ctxFor(t), varve.Start, varve.Filter{Categories: []string{"acct"}}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.Stream)
			}
			want := []string{r.Stream(ids[0]), r.Stream(ids[1]), r.Stream(ids[2])}
			if !slices.Equal(got, want) {
				t.Fatalf("filtered read of category acct: %q, want %q", got, want)
			}
		})
	}
}
