package workflow

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// TestOperate: on every backend, a failed input is the instance's last
// error until a retry request, read by the runner from the workflow's own
// category, applies it; a cancel ends the instance: its timers are
// cancelled, its unsent commands are not relayed, and later inputs and
// timers change nothing.
func TestOperate(t *testing.T) {
	for _, k := range teststore.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, k)
			var failing atomic.Bool
			def := orderDef(f.name)
			decide := def.Decide
			def.Decide = func(s order, in Input) (Decision, error) {
				if failing.Load() && in.Type == "OrderPlaced" {
					return Decision{}, errors.New("stock service down")
				}
				return decide(s, in)
			}
			r, err := NewRunner(f.store, def, f.recv, f.clock)
			if err != nil {
				t.Fatal(err)
			}

			// o1 fails, then is retried.
			failing.Store(true)
			if err := r.Handle(ctx, f.input(t, "OrderPlaced", "o1")); err == nil {
				t.Fatal("Decide failed, Handle did not")
			}
			st, err := Inspect(ctx, f.store, r.Stream("o1"))
			if err != nil {
				t.Fatal(err)
			}
			if st.LastError == nil || st.LastError.Error == "" || st.LastError.Type != "OrderPlaced" || st.Inputs != 0 {
				t.Fatalf("after a failed input: %+v", st)
			}
			if _, err := Retry(ctx, f.store, r.Stream("o1")); err != nil {
				t.Fatal(err)
			}
			failing.Store(false)
			handleOwn(t, f, r)
			st, err = Inspect(ctx, f.store, r.Stream("o1"))
			if err != nil {
				t.Fatal(err)
			}
			if st.LastError != nil || st.Inputs != 1 || st.LastEvent != "placed" || len(st.Pending) != 1 || len(st.Unsent) != 1 {
				t.Fatalf("after the retry: %+v", st)
			}
			if _, err := Retry(ctx, f.store, r.Stream("o1")); !errors.Is(err, ErrNoFailure) {
				t.Fatalf("retry without a failure: %v, want ErrNoFailure", err)
			}

			// o1 is cancelled: its timer goes, its command is not relayed.
			if err := Cancel(ctx, f.store, r.Stream("o1"), "customer asked"); err != nil {
				t.Fatal(err)
			}
			if err := Cancel(ctx, f.store, r.Stream("o1"), ""); !errors.Is(err, ErrCancelled) {
				t.Fatalf("second cancel: %v, want ErrCancelled", err)
			}
			st, err = Inspect(ctx, f.store, r.Stream("o1"))
			if err != nil {
				t.Fatal(err)
			}
			if !st.Cancelled || st.Reason != "customer asked" || len(st.Pending) != 0 || len(st.Unsent) != 0 {
				t.Fatalf("after the cancel: %+v", st)
			}
			if n, err := r.Relay(ctx, "o1"); err != nil || n != 0 {
				t.Fatalf("relay of a cancelled instance: %d sent, %v", n, err)
			}
			if err := r.Handle(ctx, f.input(t, "PaymentTaken", "o1")); err != nil {
				t.Fatal(err)
			}
			f.clock.Add(time.Hour)
			if n, err := r.FireDue(ctx, f.last(t, r.Stream("o1"))); err != nil || n != 0 {
				t.Fatalf("timers fired on a cancelled instance: %d, %v", n, err)
			}
			after, err := Inspect(ctx, f.store, r.Stream("o1"))
			if err != nil {
				t.Fatal(err)
			}
			if after.Version != st.Version || after.Inputs != 1 {
				t.Fatalf("a cancelled instance changed: %+v, was %+v", after, st)
			}

			// List shows the instance.
			page, err := List(ctx, f.store, f.name, "", 10)
			if errors.Is(err, varve.ErrNotSupported) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Instances) != 1 || page.Instances[0].Stream != r.Stream("o1") || !page.Instances[0].Cancelled {
				t.Fatalf("list: %+v", page)
			}
		})
	}
}

// handleOwn hands the runner every event of the workflow's own category,
// as a subscription to it would.
func handleOwn(t *testing.T, f *fixture, r *Runner[order]) {
	t.Helper()
	ctx := context.Background()
	last, err := f.store.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	for e, err := range f.store.ReadAll(ctx, varve.Start, varve.Filter{Categories: []string{f.name}}) {
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSeparator: on a store whose category separator is ":", instance
// streams are <name>:<id>, in the category of the workflow's name, and
// List and the retry request find them.
func TestSeparator(t *testing.T) {
	ctx := context.Background()
	store := teststore.Kinds[0].Open(t, varve.Config{CategorySeparator: ":"})
	var failing atomic.Bool
	failing.Store(true)
	def := orderDef("wfsep")
	decide := def.Decide
	def.Decide = func(s order, in Input) (Decision, error) {
		if failing.Load() {
			return Decision{}, errors.New("down")
		}
		return decide(s, in)
	}
	r, err := NewRunner(store, def, &receiver{}, &fakeClock{now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Stream("o1"); got != "wfsep:o1" || store.Category(got) != "wfsep" {
		t.Fatalf("instance stream %q in category %q", got, store.Category(got))
	}
	res, err := store.Append(ctx, "src:o1", varve.Any, varve.NewEvent("OrderPlaced", []byte("o1")))
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range store.ReadStream(ctx, "src:o1", varve.From(res.FirstVersion)) {
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Handle(ctx, e); err == nil {
			t.Fatal("Decide failed, Handle did not")
		}
	}
	page, err := List(ctx, store, "wfsep", "", 10)
	if err != nil || len(page.Instances) != 1 || page.Instances[0].LastError == nil {
		t.Fatalf("list: %+v, %v", page, err)
	}
	if _, err := Retry(ctx, store, "wfsep:o1"); err != nil {
		t.Fatal(err)
	}
	failing.Store(false)
	for e, err := range store.ReadAll(ctx, varve.Start, varve.Filter{Categories: []string{"wfsep"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	st, err := Inspect(ctx, store, "wfsep:o1")
	if err != nil || st.LastError != nil || st.Inputs != 1 {
		t.Fatalf("after the retry: %+v, %v", st, err)
	}
}
