package aggregate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/schema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// forEachBackend runs test on every backend, in parallel.
func forEachBackend(t *testing.T, test func(t *testing.T, env *env)) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, newEnv(t, b.open(t)))
		})
	}
}

// env is one test's store over a counting backend.
type env struct {
	store *varve.Store
	b     *countingBackend
	cat   string // unique category of the test
}

func newEnv(t *testing.T, b varve.Backend) *env {
	t.Helper()
	cb := &countingBackend{Backend: b}
	s, err := varve.New(cb, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var suffix [4]byte
	rand.Read(suffix[:])
	return &env{store: s, b: cb, cat: "acct" + hex.EncodeToString(suffix[:])}
}

// needSnapshots skips a test that needs a snapshot store on a backend
// without one.
func (e *env) needSnapshots(t *testing.T) {
	t.Helper()
	if _, ok := e.b.Backend.(varve.SnapshotStore); !ok {
		t.Skipf("backend %q does not implement varve.SnapshotStore", e.b.Features().Name)
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// countingBackend counts the calls a repository makes and can fail appends.
type countingBackend struct {
	varve.Backend
	appends, reads, eventsRead, snapLoads, snapSaves atomic.Int64
	// failAppend, when set, is asked before each append; a non-nil error
	// fails the append without reaching the backend.
	failAppend atomic.Pointer[func(varve.AppendRequest) error]
}

type counts struct{ appends, reads, eventsRead, snapLoads, snapSaves int64 }

func (c *countingBackend) counts() counts {
	return counts{c.appends.Load(), c.reads.Load(), c.eventsRead.Load(), c.snapLoads.Load(), c.snapSaves.Load()}
}

func (c counts) minus(o counts) counts {
	return counts{c.appends - o.appends, c.reads - o.reads, c.eventsRead - o.eventsRead, c.snapLoads - o.snapLoads, c.snapSaves - o.snapSaves}
}

func (c *countingBackend) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	c.appends.Add(1)
	if f := c.failAppend.Load(); f != nil {
		if err := (*f)(req); err != nil {
			return varve.AppendResult{}, err
		}
	}
	return c.Backend.Append(ctx, req)
}

func (c *countingBackend) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	c.reads.Add(1)
	n := len(buf)
	out, err := c.Backend.ReadStream(ctx, q, buf)
	c.eventsRead.Add(int64(len(out) - n))
	return out, err
}

func (c *countingBackend) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	c.snapSaves.Add(1)
	return c.Backend.(varve.SnapshotStore).SaveSnapshot(ctx, s)
}

func (c *countingBackend) LoadSnapshot(ctx context.Context, stream string) (varve.Snapshot, bool, error) {
	c.snapLoads.Add(1)
	return c.Backend.(varve.SnapshotStore).LoadSnapshot(ctx, stream)
}

// The account: a balance changed by deposits and withdrawals.
type Account struct {
	Balance int `json:"balance"`
	Ops     int `json:"ops"`
}

type Deposited struct {
	Amount int `json:"amount"`
}

type Withdrawn struct {
	Amount int `json:"amount"`
}

var errInsufficient = errors.New("insufficient funds")

var accountEvents = func() *schema.Registry {
	r := schema.NewRegistry()
	schema.Register[Deposited](r, "Deposited")
	schema.Register[Withdrawn](r, "Withdrawn")
	return r
}()

func applyAccount(s Account, e any) Account {
	switch e := e.(type) {
	case Deposited:
		s.Balance += e.Amount
	case Withdrawn:
		s.Balance -= e.Amount
	}
	s.Ops++
	return s
}

func accountDef(cat string) aggregate.Definition[Account] {
	return aggregate.Definition[Account]{Category: cat, Apply: applyAccount, Events: accountEvents, SchemaVersion: 1}
}

func deposit(n int) func(*aggregate.Aggregate[Account]) error {
	return func(a *aggregate.Aggregate[Account]) error { return a.Raise(Deposited{Amount: n}) }
}

func withdraw(n int) func(*aggregate.Aggregate[Account]) error {
	return func(a *aggregate.Aggregate[Account]) error {
		if a.State().Balance < n {
			return errInsufficient
		}
		return a.Raise(Withdrawn{Amount: n})
	}
}

func newAccounts(t *testing.T, e *env, cfg aggregate.Config) *aggregate.Repository[Account] {
	t.Helper()
	if cfg.SnapshotEvery > 0 {
		e.needSnapshots(t)
	}
	r, err := aggregate.New(e.store, accountDef(e.cat), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustExecute[T any](t *testing.T, r *aggregate.Repository[T], id string, cmd func(*aggregate.Aggregate[T]) error) *aggregate.Aggregate[T] {
	t.Helper()
	a, err := r.Execute(ctxFor(t), id, cmd)
	if err != nil {
		t.Fatalf("execute on %s: %v", id, err)
	}
	return a
}

// storedTypes returns the types of the stored events of stream.
func storedTypes(t *testing.T, s *varve.Store, stream string) []string {
	t.Helper()
	var out []string
	for e, err := range s.ReadStream(ctxFor(t), stream) {
		if err != nil {
			t.Fatalf("read %s: %v", stream, err)
		}
		out = append(out, e.Type+":"+string(e.Data))
	}
	return out
}

// The cart: a state with a slice and a map, which the cache must copy.
type Cart struct {
	Items []string       `json:"items"`
	Qty   map[string]int `json:"qty"`
}

type ItemAdded struct {
	Item string `json:"item"`
}

var cartEvents = func() *schema.Registry {
	r := schema.NewRegistry()
	schema.Register[ItemAdded](r, "ItemAdded")
	return r
}()

// applyCart appends to the slice and changes the map in place, as Go code
// often does: correct only if no two aggregates share a state.
func applyCart(s Cart, e any) Cart {
	if e, ok := e.(ItemAdded); ok {
		s.Items = append(s.Items, e.Item)
		if s.Qty == nil {
			s.Qty = map[string]int{}
		}
		s.Qty[e.Item]++
	}
	return s
}

func cloneCart(c Cart) Cart {
	return Cart{Items: slices.Clone(c.Items), Qty: maps.Clone(c.Qty)}
}
