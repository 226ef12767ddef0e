package command_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/command"
	"github.com/varve-go/varve/dcb"
	"github.com/varve-go/varve/internal/teststore"
	"github.com/varve-go/varve/schema"
)

type Reserve struct{ Seat string }

func (r Reserve) Validate() error {
	if r.Seat == "" {
		return errors.New("no seat")
	}
	return nil
}

var errTaken = errors.New("seat taken")

// seats is a DCB decider: a seat is reserved once.
var seats = command.Decider[bool, Reserve]{
	Query: func(c Reserve) varve.Query {
		return varve.Query{Items: []varve.QueryItem{{Tags: []string{"seat:" + c.Seat}}}}
	},
	Initial: func(Reserve) bool { return false },
	Apply:   func(bool, varve.RecordedEvent) bool { return true },
	Decide: func(taken bool, c Reserve) (dcb.Decision, error) {
		if taken {
			return dcb.Decision{}, errTaken
		}
		e := varve.Event{Type: "SeatReserved", Data: []byte(`{}`), Tags: []string{"seat:" + c.Seat}}
		return dcb.Decision{Stream: "seat-" + c.Seat, Events: []varve.Event{e}}, nil
	},
}

func newBus(t testing.TB, s *varve.Store, mw ...command.Middleware) *command.Bus {
	t.Helper()
	b := command.New(mw...)
	if err := command.Handle(b, command.Decide(s, seats)); err != nil {
		t.Fatal(err)
	}
	return b
}

func readStream(t testing.TB, s *varve.Store, stream string) []varve.RecordedEvent {
	t.Helper()
	var out []varve.RecordedEvent
	for e, err := range s.ReadStream(context.Background(), stream) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func eachBackend(t *testing.T, f func(t *testing.T, s *varve.Store)) {
	for _, k := range teststore.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			s := k.Open(t, varve.Config{})
			if _, ok := s.Backend().(varve.TagStore); !ok {
				// Decide needs DCB; it says so with a typed error.
				_, err := newBus(t, s).Dispatch(context.Background(), "c-0", Reserve{Seat: "0"})
				if !errors.Is(err, varve.ErrNotSupported) {
					t.Fatalf("Decide on a backend without tags: %v, want ErrNotSupported", err)
				}
				t.Skipf("%s keeps no tags: Decide is not supported", k.Name)
			}
			f(t, s)
		})
	}
}

func TestRetryReturnsFirstOutcome(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store) {
		ctx := context.Background()
		b := newBus(t, s, command.Validate())
		first, err := b.Dispatch(ctx, "c-1", Reserve{Seat: "1A"})
		if err != nil {
			t.Fatal(err)
		}
		if first.Duplicate || first.Stream != "seat-1A" || first.Version != 1 {
			t.Fatalf("first outcome %+v", first)
		}
		again, err := b.Dispatch(ctx, "c-1", Reserve{Seat: "1A"})
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		if want := (command.Result{Stream: "seat-1A", Version: 1, Duplicate: true}); again != want {
			t.Fatalf("retry outcome %+v, want %+v", again, want)
		}
		if n := len(readStream(t, s, "seat-1A")); n != 1 {
			t.Fatalf("%d events after a retry, want 1", n)
		}
		// Another command on the same seat is decided, not deduplicated.
		if _, err := b.Dispatch(ctx, "c-2", Reserve{Seat: "1A"}); !errors.Is(err, errTaken) {
			t.Fatalf("other command: %v, want errTaken", err)
		}
	})
}

// TestUnknownOutcome: the first attempt committed but its answer never
// reached the caller; a retry through another bus (another process)
// returns the first outcome and appends nothing.
func TestUnknownOutcome(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store) {
		ctx := context.Background()
		lost := errors.New("connection lost")
		drop := func(next command.Handler) command.Handler {
			return func(ctx context.Context, env command.Envelope) (command.Result, error) {
				if _, err := next(ctx, env); err != nil {
					return command.Result{}, err
				}
				return command.Result{}, lost
			}
		}
		if _, err := newBus(t, s, drop).Dispatch(ctx, "c-9", Reserve{Seat: "2B"}); !errors.Is(err, lost) {
			t.Fatalf("first attempt: %v", err)
		}
		got, err := newBus(t, s).Dispatch(ctx, "c-9", Reserve{Seat: "2B"})
		if err != nil {
			t.Fatal(err)
		}
		if want := (command.Result{Stream: "seat-2B", Version: 1, Duplicate: true}); got != want {
			t.Fatalf("retry %+v, want %+v", got, want)
		}
		evs := readStream(t, s, "seat-2B")
		if len(evs) != 1 || evs[0].ID != command.EventID("c-9", 0) {
			t.Fatalf("events %+v, want one with the derived id", evs)
		}
	})
}

// TestConcurrentRetries: two buses on one store dispatch the same command
// from several goroutines at once; exactly one appends.
func TestConcurrentRetries(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store) {
		ctx := context.Background()
		buses := []*command.Bus{newBus(t, s), newBus(t, s)}
		const each = 4
		var wg sync.WaitGroup
		results := make(chan command.Result, 2*each)
		errs := make(chan error, 2*each)
		start := make(chan struct{})
		for _, b := range buses {
			for range each {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := b.Dispatch(ctx, "c-race", Reserve{Seat: "3C"})
					if err != nil {
						errs <- err
						return
					}
					results <- r
				}()
			}
		}
		close(start)
		wg.Wait()
		close(results)
		close(errs)
		for err := range errs {
			t.Errorf("dispatch: %v", err)
		}
		// Duplicate may be false for a loser whose append the store
		// deduplicated by event id: the outcome is the same.
		for r := range results {
			if r.Stream != "seat-3C" || r.Version != 1 {
				t.Errorf("outcome %+v", r)
			}
		}
		if n := len(readStream(t, s, "seat-3C")); n != 1 {
			t.Errorf("%d events, want 1", n)
		}
	})
}

func TestMetadata(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *varve.Store) {
		ctx := aggregate.WithCorrelation(context.Background(), "req-7")
		b := newBus(t, s)
		if _, err := b.Dispatch(ctx, "c-m", Reserve{Seat: "4D"}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			stream string
			want   aggregate.Metadata
		}{
			{"seat-4D", aggregate.Metadata{CorrelationID: "req-7", CausationID: "c-m"}},
		} {
			evs := readStream(t, s, tc.stream)
			if len(evs) != 1 {
				t.Fatalf("%s: %d events", tc.stream, len(evs))
			}
			m, err := aggregate.ReadMetadata(evs[0])
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want {
				t.Errorf("%s: metadata %+v, want %+v", tc.stream, m, tc.want)
			}
		}
	})
}

// TestAggregateMetadata runs on every backend, NATS included.
func TestAggregateMetadata(t *testing.T) {
	for _, k := range teststore.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			s := k.Open(t, varve.Config{})
			b := command.New(command.Validate())
			events := schema.NewRegistry()
			schema.Register[Incremented](events, "Incremented")
			repo, err := aggregate.New(s, aggregate.Definition[int]{Category: "counter", Events: events,
				Apply: func(n int, e any) int { return n + e.(Incremented).By }}, aggregate.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if err := command.Handle(b, command.Aggregate(repo, func(c Increment) string { return c.Counter },
				func(a *aggregate.Aggregate[int], c Increment) error { return a.Raise(Incremented{By: c.By}) })); err != nil {
				t.Fatal(err)
			}
			r, err := b.Dispatch(context.Background(), "c-a", Increment{Counter: "x", By: 2})
			if err != nil {
				t.Fatal(err)
			}
			if r.Stream != "counter-x" || r.Version != 1 {
				t.Fatalf("aggregate outcome %+v", r)
			}
			evs := readStream(t, s, "counter-x")
			if len(evs) != 1 {
				t.Fatalf("%d events", len(evs))
			}
			m, err := aggregate.ReadMetadata(evs[0])
			if err != nil {
				t.Fatal(err)
			}
			if want := (aggregate.Metadata{CorrelationID: "c-a", CausationID: "c-a"}); m != want {
				t.Errorf("metadata %+v, want %+v", m, want)
			}
		})
	}
}

type Increment struct {
	Counter string
	By      int
}

type Incremented struct{ By int }

func TestMiddlewareAndErrors(t *testing.T) {
	var order []string
	mark := func(name string) command.Middleware {
		return func(next command.Handler) command.Handler {
			return func(ctx context.Context, env command.Envelope) (command.Result, error) {
				order = append(order, name+">")
				r, err := next(ctx, env)
				order = append(order, "<"+name)
				return r, err
			}
		}
	}
	b := command.New(mark("a"), command.Validate(), mark("b"))
	if err := command.Handle(b, func(ctx context.Context, id string, c Reserve) (command.Result, error) {
		order = append(order, "handler")
		return command.Result{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.Dispatch(ctx, "c-1", Reserve{Seat: "1"}); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(order), "[a> b> handler <b <a]"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
	order = nil
	_, err := b.Dispatch(ctx, "c-2", Reserve{})
	if !errors.Is(err, command.ErrInvalid) {
		t.Errorf("invalid command: %v", err)
	}
	if got, want := fmt.Sprint(order), "[a> <a]"; got != want {
		t.Errorf("order on invalid command %s, want %s", got, want)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"unknown type", func() error { _, err := b.Dispatch(ctx, "c-3", 42); return err }(), command.ErrUnknownCommand},
		{"empty id", func() error { _, err := b.Dispatch(ctx, "", Reserve{Seat: "1"}); return err }(), varve.ErrInvalidArgument},
		{"registered twice", command.Handle(b, func(context.Context, string, Reserve) (command.Result, error) {
			return command.Result{}, nil
		}), varve.ErrInvalidArgument},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

// TestAggregateUnknownOutcome: an Aggregate handler is idempotent by
// command id on every backend, NATS included: the first attempt committed
// and its answer was lost; a retry through another bus and repository (as
// another process) returns the first outcome and appends nothing, though
// the command decided on the state after it would fail.
func TestAggregateUnknownOutcome(t *testing.T) {
	for _, k := range teststore.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			s := k.Open(t, varve.Config{})
			ctx := context.Background()
			lost := errors.New("connection lost")
			drop := func(next command.Handler) command.Handler {
				return func(ctx context.Context, env command.Envelope) (command.Result, error) {
					if _, err := next(ctx, env); err != nil {
						return command.Result{}, err
					}
					return command.Result{}, lost
				}
			}
			bus := func(mw ...command.Middleware) *command.Bus {
				events := schema.NewRegistry()
				schema.Register[Incremented](events, "Incremented")
				repo, err := aggregate.New(s, aggregate.Definition[int]{Category: "limited", Events: events,
					Apply: func(n int, e any) int { return n + e.(Incremented).By }}, aggregate.Config{CacheSize: 8})
				if err != nil {
					t.Fatal(err)
				}
				b := command.New(mw...)
				if err := command.Handle(b, command.Aggregate(repo, func(c Increment) string { return c.Counter },
					func(a *aggregate.Aggregate[int], c Increment) error {
						if a.State()+c.By > 3 {
							return errors.New("over the limit")
						}
						return a.Raise(Incremented{By: c.By})
					})); err != nil {
					t.Fatal(err)
				}
				return b
			}
			if _, err := bus().Dispatch(ctx, "c-0", Increment{Counter: "y", By: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := bus(drop).Dispatch(ctx, "c-1", Increment{Counter: "y", By: 2}); !errors.Is(err, lost) {
				t.Fatalf("first attempt: %v", err)
			}
			got, err := bus().Dispatch(ctx, "c-1", Increment{Counter: "y", By: 2})
			if want := (command.Result{Stream: "limited-y", Version: 2, Duplicate: true}); err != nil || got != want {
				t.Fatalf("retry: %+v, %v; want %+v", got, err, want)
			}
			if n := len(readStream(t, s, "limited-y")); n != 2 {
				t.Fatalf("%d events, want 2", n)
			}
		})
	}
}
