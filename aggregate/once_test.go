package aggregate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
)

// lostAnswer commits an append and then, once armed, answers it with
// varve.ErrUnknownOutcome, as a connection lost after the commit does.
type lostAnswer struct {
	varve.Backend
	armed atomic.Bool
}

func (b *lostAnswer) Unwrap() varve.Backend { return b.Backend }

func (b *lostAnswer) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	res, err := b.Backend.Append(ctx, req)
	if err == nil && b.armed.CompareAndSwap(true, false) {
		return varve.AppendResult{}, varve.ErrUnknownOutcome
	}
	return res, err
}

// raise returns a command raising a deposit of 1 n(state) times.
func raise(n func(Account) int) func(*aggregate.Aggregate[Account]) error {
	return func(a *aggregate.Aggregate[Account]) error {
		for range n(a.State()) {
			if err := a.Raise(Deposited{Amount: 1}); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestExecuteOnce: a retried command (same id) whose events are stored runs
// nothing and returns the first run's versions, whatever the retry decides
// on the state after the first run: the same events, fewer, more, none, or
// an error.
func TestExecuteOnce(t *testing.T) {
	tests := []struct {
		name string
		// setup runs before the command, which is then run twice.
		setup       func(*aggregate.Aggregate[Account]) error
		cmd         func(*aggregate.Aggregate[Account]) error
		first, last varve.Version // of the command's events
		balance     int
	}{
		{"same events", nil, deposit(5), 1, 1, 5},
		{"retry fails", deposit(10), withdraw(10), 2, 2, 0},
		{"retry decides nothing", nil, func(a *aggregate.Aggregate[Account]) error {
			if b := a.State().Balance; b != 7 {
				return a.Raise(Deposited{Amount: 7 - b})
			}
			return nil
		}, 1, 1, 7},
		{"retry raises more", nil, raise(func(s Account) int { return 1 + s.Ops }), 1, 1, 1},
		{"retry raises fewer", nil, raise(func(s Account) int { return max(1, 3-s.Ops) }), 1, 3, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, e *env) {
				for _, cache := range []int{0, 16} {
					r := newAccounts(t, e, aggregate.Config{CacheSize: cache})
					id := fmt.Sprintf("%s-%d", tc.name, cache)
					if tc.setup != nil {
						mustExecute(t, r, id, tc.setup)
					}
					a, once, err := r.ExecuteOnce(ctxFor(t), id, "cmd-1", tc.cmd)
					if err != nil {
						t.Fatalf("first run (cache %d): %v", cache, err)
					}
					want := aggregate.Once{First: tc.first, Last: tc.last}
					if once != want || a.Version() != want.Last {
						t.Fatalf("first run (cache %d): %+v at version %d, want %+v", cache, once, a.Version(), want)
					}
					for retry := range 2 {
						a, once, err = r.ExecuteOnce(ctxFor(t), id, "cmd-1", tc.cmd)
						want.Duplicate = true
						if err != nil || once != want {
							t.Fatalf("retry %d (cache %d): %+v, %v; want %+v", retry, cache, once, err, want)
						}
						if a.State().Balance != tc.balance || a.Version() != want.Last {
							t.Fatalf("retry %d (cache %d): aggregate at %d with %+v, want version %d balance %d",
								retry, cache, a.Version(), a.State(), want.Last, tc.balance)
						}
					}
					if n := len(storedTypes(t, e.store, r.Stream(id))); n != int(want.Last) {
						t.Fatalf("cache %d: %d events stored, want %d", cache, n, want.Last)
					}
					// Another command id is another command.
					if _, once, err := r.ExecuteOnce(ctxFor(t), id, "cmd-2", deposit(1)); err != nil || once.Duplicate || once.First != want.Last+1 {
						t.Fatalf("cache %d: another command: %+v, %v", cache, once, err)
					}
				}
			})
		})
	}
}

// TestExecuteOnceUnknownOutcome: the first run committed and its answer was
// lost; a retry in the same repository, and one in another repository (as
// another process would), return its outcome and write nothing.
func TestExecuteOnceUnknownOutcome(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		lost := &lostAnswer{Backend: e.store.Backend()}
		s, err := varve.New(lost, varve.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		mine, err := aggregate.New(s, accountDef(e.cat), aggregate.Config{CacheSize: 16})
		if err != nil {
			t.Fatal(err)
		}
		other := newAccounts(t, e, aggregate.Config{})
		mustExecute(t, mine, "u", deposit(1))
		lost.armed.Store(true)
		if _, _, err := mine.ExecuteOnce(ctxFor(t), "u", "pay-1", raise(func(Account) int { return 2 })); !errors.Is(err, varve.ErrUnknownOutcome) {
			t.Fatalf("first run: %v, want ErrUnknownOutcome", err)
		}
		want := aggregate.Once{First: 2, Last: 3, Duplicate: true}
		for name, r := range map[string]*aggregate.Repository[Account]{"same": mine, "other": other} {
			a, once, err := r.ExecuteOnce(ctxFor(t), "u", "pay-1", raise(func(Account) int { return 2 }))
			if err != nil || once != want || a.State().Balance != 3 {
				t.Fatalf("%s repository's retry: %+v balance %d, %v; want %+v balance 3", name, once, a.State().Balance, err, want)
			}
		}
		if n := len(storedTypes(t, e.store, mine.Stream("u"))); n != 3 {
			t.Fatalf("%d events stored, want 3", n)
		}
	})
}

// TestExecuteOnceConcurrent: two repositories run the same command from
// several goroutines at once; it is written once and every caller gets its
// versions.
func TestExecuteOnceConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		repos := []*aggregate.Repository[Account]{newAccounts(t, e, aggregate.Config{CacheSize: 16}), newAccounts(t, e, aggregate.Config{})}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var dups atomic.Int32
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				<-start
				_, once, err := repos[i%2].ExecuteOnce(ctxFor(t), "c", "race-1", raise(func(s Account) int { return 2 - s.Ops%2 }))
				if err == nil && (once.First != 1 || once.Last != 2) {
					err = errors.New("outcome not the first run's")
				}
				if once.Duplicate {
					dups.Add(1)
				}
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if n := len(storedTypes(t, e.store, repos[0].Stream("c"))); n != 2 {
			t.Fatalf("%d events stored, want 2", n)
		}
		t.Logf("%d of 8 callers saw a duplicate", dups.Load())
	})
}

func TestExecuteOnceEmptyID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := newAccounts(t, e, aggregate.Config{})
		if _, _, err := r.ExecuteOnce(ctxFor(t), "x", "", deposit(1)); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Fatalf("empty command id: %v, want ErrInvalidArgument", err)
		}
	})
}

// TestExecuteOnceAfterOthers: a retry after other commands (and a
// snapshot) returns the first outcome, whatever it would decide now.
func TestExecuteOnceAfterOthers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, cache := range []int{0, 16} {
			r := newAccounts(t, e, aggregate.Config{SnapshotEvery: 1, CacheSize: cache})
			id := fmt.Sprint("others-", cache)
			if _, _, err := r.ExecuteOnce(ctxFor(t), id, "pay-1", raise(func(Account) int { return 2 })); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.ExecuteOnce(ctxFor(t), id, "pay-2", deposit(1)); err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 2, 3} {
				a, once, err := r.ExecuteOnce(ctxFor(t), id, "pay-1", raise(func(Account) int { return n }))
				if err != nil || once != (aggregate.Once{First: 1, Last: 2, Duplicate: true}) || a.State().Balance != 3 || a.Version() != 3 {
					t.Fatalf("cache %d n %d: %+v %v balance %d", cache, n, once, err, a.State().Balance)
				}
			}
		}
	})
}
