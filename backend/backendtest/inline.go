package backendtest

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/varve-go/varve"
)

// PoisonType is the event type on which the hook of an [InlineModel]
// fails, with [ErrPoison].
const PoisonType = "Poison"

// ErrPoison is the error of an [InlineModel]'s hook on a [PoisonType]
// event.
var ErrPoison = errors.New("backendtest: poison event")

// InlineRow is a stream's row in the read model of an [InlineModel]: the
// number of its events the hook saw, and the version and position of the
// last one.
type InlineRow struct {
	N    int64
	Last varve.Version
	Pos  varve.Position
}

// InlineModel is a backend's inline projection under test: its hook
// (installed in the backend the store runs on) adds each event to its
// stream's [InlineRow] in a table, and fails with ErrPoison on an event of
// type PoisonType.
type InlineModel struct {
	// Read returns the committed rows of the streams whose names start
	// with prefix.
	Read func(t testing.TB, prefix string) map[string]InlineRow
	// Calls returns how many times the hook was called.
	Calls func() int64
}

// Inline checks an inline projection: its writes commit with the append
// (Append, AppendMulti, AppendIf where the backend has them), a failing
// hook fails the append with varve.ErrInline and leaves neither the events
// nor its writes, a retry of a committed append and a failed append do
// not call it, and concurrent appends, some of which fail, leave the read
// model equal to the fold of the streams.
func Inline(t *testing.T, s *varve.Store, m InlineModel) {
	ctx := ctxFor(t)
	p := prefix(t)
	a, b := p+"a", p+"b"
	streams := map[string]bool{}
	check := func(step string) {
		t.Helper()
		want := map[string]InlineRow{}
		for st := range streams {
			evs, err := collect(s.ReadStream(ctx, st))
			if errors.Is(err, varve.ErrStreamNotFound) {
				continue
			}
			if err != nil {
				t.Fatalf("%s: read %q: %v", step, st, err)
			}
			if n := len(evs); n > 0 {
				want[st] = InlineRow{N: int64(n), Last: evs[n-1].Version, Pos: evs[n-1].Position}
			}
		}
		if got := m.Read(t, p); !maps.Equal(got, want) {
			t.Fatalf("%s: read model %v, want the fold of the streams %v", step, got, want)
		}
	}
	poison := func() varve.Event { return varve.NewEvent(PoisonType, []byte(`{}`)) }
	first := events("Counted", 3)
	var firstRes varve.AppendResult
	_, multi := s.Backend().(varve.MultiAppender)
	_, tags := s.Backend().(varve.TagStore)
	cond := varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Types: []string{"Never"}}}}}
	steps := []struct {
		name  string
		skip  bool
		run   func() error
		want  error // nil: success
		calls int64 // the calls the step adds
	}{
		{"append", false, func() (err error) {
			firstRes, err = s.Append(ctx, a, varve.NoStream, first...)
			return err
		}, nil, 1},
		{"failing hook", false, func() error {
			_, err := s.Append(ctx, a, 3, events("Counted", 1)[0], poison())
			return err
		}, ErrPoison, 1},
		{"retry", false, func() error {
			res, err := s.Append(ctx, a, varve.NoStream, first...)
			if err == nil && res != firstRes {
				err = fmt.Errorf("retry result %+v, want %+v", res, firstRes)
			}
			return err
		}, nil, 0},
		{"conflict", false, func() error {
			_, err := s.Append(ctx, a, varve.NoStream, events("Counted", 1)...)
			return err
		}, varve.ErrWrongExpectedVersion, 0},
		{"multi", !multi, func() error {
			_, err := s.AppendMulti(ctx, []varve.StreamAppend{{Stream: a, Expected: 3, Events: events("Counted", 1)},
				{Stream: b, Expected: varve.NoStream, Events: events("Counted", 2)}})
			return err
		}, nil, 1},
		{"multi, failing hook", !multi, func() error {
			_, err := s.AppendMulti(ctx, []varve.StreamAppend{{Stream: a, Expected: 4, Events: events("Counted", 1)},
				{Stream: b, Expected: 2, Events: []varve.Event{poison()}}})
			return err
		}, ErrPoison, 1},
		{"append if", !tags, func() error {
			_, err := s.AppendIf(ctx, b, varve.Any, cond, events("Counted", 2)...)
			return err
		}, nil, 1},
		{"append if, condition fails", !tags, func() error {
			failing := varve.AppendCondition{FailIfEventsMatch: varve.Query{Items: []varve.QueryItem{{Types: []string{"Counted"}}}}}
			_, err := s.AppendIf(ctx, b, varve.Any, failing, events("Counted", 1)...)
			return err
		}, varve.ErrAppendConditionFailed, 0},
		{"tagged", !tags, func() error {
			e := events("Counted", 1)
			e[0].Tags = []string{"order:1"}
			_, err := s.Append(ctx, b, varve.Any, e...)
			return err
		}, nil, 1},
		{"append if, failing hook", !tags, func() error {
			_, err := s.AppendIf(ctx, b, varve.Any, cond, poison())
			return err
		}, ErrPoison, 1},
	}
	streams[a], streams[b] = true, true
	for _, st := range steps {
		if st.skip {
			continue
		}
		before := m.Calls()
		err := st.run()
		switch {
		case st.want == nil && err != nil:
			t.Fatalf("%s: %v", st.name, err)
		case st.want != nil && !errors.Is(err, st.want):
			t.Fatalf("%s: got %v, want %v", st.name, err, st.want)
		case errors.Is(st.want, ErrPoison) && !errors.Is(err, varve.ErrInline):
			t.Fatalf("%s: %v does not wrap varve.ErrInline", st.name, err)
		}
		if n := m.Calls() - before; n != st.calls {
			t.Fatalf("%s: the hook ran %d times, want %d", st.name, n, st.calls)
		}
		check(st.name)
	}

	// Concurrent writers, each to a stream of its own and to a shared one;
	// every 7th append carries a poison event.
	const writers, appends = 4, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*appends)
	for w := range writers {
		own := fmt.Sprintf("%sc-%d", p, w)
		streams[own] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range appends {
				st := own
				if i%3 == 0 {
					st = p + "shared"
				}
				evs := events("Counted", 1+i%3)
				if i%7 == 3 {
					evs = append(evs, poison())
				}
				_, err := s.Append(ctx, st, varve.Any, evs...)
				switch {
				case i%7 == 3 && !(errors.Is(err, varve.ErrInline) && errors.Is(err, ErrPoison)):
					errs <- fmt.Errorf("poisoned append %d of writer %d to %s: got %v, want ErrInline", i, w, st, err)
				case i%7 != 3 && err != nil:
					errs <- fmt.Errorf("append %d of writer %d to %s: %v", i, w, st, err)
				}
			}
		}()
	}
	streams[p+"shared"] = true
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	check("concurrent appends")
}
