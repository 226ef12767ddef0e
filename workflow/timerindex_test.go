package workflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

func TestTimerIndexBudget(t *testing.T) {
	at := func(m int) timerKey {
		return timerKey{due: t0.Add(time.Duration(m) * time.Minute), stream: "s", id: fmt.Sprint(m)}
	}
	tests := []struct {
		name      string
		count     int
		bytes     int64
		schedule  []int
		wantFirst int
		wantLen   int
		wantLimit int // -1: unbounded
	}{
		{"under budget", 10, 1 << 20, []int{5, 3, 9}, 3, 3, -1},
		{"count keeps earliest", 2, 1 << 20, []int{5, 3, 9, 1}, 1, 2, 5},
		{"late timer past limit not kept", 2, 1 << 20, []int{1, 2, 3, 9}, 1, 2, 3},
		{"bytes keep earliest", 100, 2 * (timerOverhead + 3), []int{7, 4, 6, 8}, 4, 2, 7},
		{"one kept whatever its size", 100, 1, []int{7, 4}, 4, 1, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newTimerIndex(tt.count, tt.bytes)
			for _, m := range tt.schedule {
				x.schedule(at(m), varve.Start, nil)
			}
			first := x.firstEntry().timerKey
			if first != at(tt.wantFirst) || x.len() != tt.wantLen {
				t.Fatalf("first %v, len %d; want %v, %d", first.id, x.len(), tt.wantFirst, tt.wantLen)
			}
			if tt.wantLimit < 0 != x.unbounded || !x.unbounded && x.limit != at(tt.wantLimit) {
				t.Fatalf("limit %v (unbounded %v), want %d", x.limit.id, x.unbounded, tt.wantLimit)
			}
		})
	}
}

// tickDef schedules, reschedules and cancels timers by input events whose
// data is "instance|timer|minutes after t0" (minutes < 0 cancels); a fired
// timer appends a "fired" event naming it.
func tickDef(name string) Definition[struct{}] {
	parse := func(d []byte) (inst, timer string, min int) {
		parts := strings.Split(string(d), "|")
		fmt.Sscan(parts[2], &min)
		return parts[0], parts[1], min
	}
	return Definition[struct{}]{
		Name: name,
		Route: func(e *varve.RecordedEvent) (string, bool) {
			inst, _, _ := parse(e.Data)
			return inst, e.Type == "Tick"
		},
		Evolve: func(s struct{}, _ *varve.RecordedEvent) struct{} { return s },
		Decide: func(_ struct{}, in Input) (Decision, error) {
			if in.Timer != "" {
				return Decision{Events: []varve.Event{{Type: "fired", Data: []byte(in.Timer)}}}, nil
			}
			_, timer, min := parse(in.Data)
			if min < 0 {
				return Decision{Cancel: []string{timer}}, nil
			}
			return Decision{Timers: []Timer{{ID: timer, Due: t0.Add(time.Duration(min) * time.Minute)}}}, nil
		},
	}
}

type tickPlan struct {
	due     map[string]int // stream|timer -> minutes, of timers that must fire
	through varve.Position
}

// tick schedules 24 timers on 12 instances at shuffled minutes 1..24,
// reschedules one later, and cancels two.
func tick(t *testing.T, f *fixture, r *Runner[struct{}]) tickPlan {
	t.Helper()
	ctx := context.Background()
	p := tickPlan{due: map[string]int{}}
	send := func(inst, timer string, min int) {
		t.Helper()
		e := f.input(t, "Tick", fmt.Sprintf("%s|%s|%d", inst, timer, min))
		if err := r.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
		if pos := f.last(t, r.Stream(inst)); p.through.Less(pos) {
			p.through = pos
		}
		key := r.Stream(inst) + "|" + timer
		if min < 0 {
			delete(p.due, key)
		} else {
			p.due[key] = min
		}
	}
	for i, m := range rand.Perm(24) {
		send(fmt.Sprintf("i%d", i%12), fmt.Sprintf("t%d", i/12), m+1)
	}
	send("i0", "t0", 30)
	send("i1", "t1", -1)
	send("i2", "t0", -1)
	if len(p.due) != 22 {
		t.Fatalf("plan has %d timers, want 22", len(p.due))
	}
	return p
}

// firings returns stream|timer of each fired timer, in $all order.
func firings(t *testing.T, f *fixture, r *Runner[struct{}], through varve.Position) []string {
	t.Helper()
	ctx := context.Background()
	if err := f.store.WaitFor(ctx, through); err != nil {
		t.Fatal(err)
	}
	var got []string
	for e, err := range f.store.ReadAll(ctx, varve.Start, varve.Filter{Categories: []string{f.name}, Types: []string{"fired"}}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Stream+"|"+string(e.Data))
	}
	return got
}

func (f *fixture) tickRunner(t *testing.T) *Runner[struct{}] {
	r, err := NewRunnerConfig(f.store, tickDef(f.name), f.recv, Config{Clock: f.clock, TimerIndexCount: 2, TimerIndexBytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// With room for 2 timers, 22 fire once each, in due order, and the index
// never holds more than 2.
func TestTimerIndexTinyBudget(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		f := newFixture(t, k)
		r := f.tickRunner(t)
		p := tick(t, f, r)
		total := 0
		last := p.through
		for _, m := range []int{0, 7, 14, 21, 31} {
			f.clock.Add(time.Duration(m)*time.Minute - f.clock.Now().Sub(t0))
			n, err := r.FireDue(ctx, last)
			if err != nil {
				t.Fatal(err)
			}
			total += n
			if st := r.TimerIndex(); st.Timers > 2 {
				t.Fatalf("index holds %d timers, budget 2", st.Timers)
			}
			if _, err := f.store.Append(ctx, f.name+"src-mark", varve.Any, varve.NewEvent("mark", nil)); err != nil {
				t.Fatal(err)
			}
			last = f.last(t, f.name+"src-mark")
		}
		got := firings(t, f, r, last)
		if total != 22 || len(got) != 22 {
			t.Fatalf("fired %d, recorded %d; want 22", total, len(got))
		}
		dues := make([]int, len(got))
		for i, g := range got {
			m, ok := p.due[g]
			if !ok {
				t.Fatalf("fired %s, which was cancelled", g)
			}
			delete(p.due, g)
			dues[i] = m
		}
		if !slices.IsSorted(dues) {
			t.Fatalf("fired out of due order: %v", dues)
		}
		if st := r.TimerIndex(); st.Rescans == 0 || !st.Complete || st.Timers != 0 {
			t.Fatalf("index at the end: %+v; want rescans, complete, empty", st)
		}
	})
}

// Two runners with room for 2 timers each fire 22 timers once in all.
func TestTimerIndexTinyBudgetCompeting(t *testing.T) {
	teststore.Each(t, func(t *testing.T, k teststore.Kind) {
		ctx := context.Background()
		f := newFixture(t, k)
		a, b := f.tickRunner(t), f.tickRunner(t)
		p := tick(t, f, a)
		f.clock.Add(31 * time.Minute)
		var wg sync.WaitGroup
		fired, errs := make([]int, 2), make([]error, 2)
		for i, r := range []*Runner[struct{}]{a, b} {
			wg.Go(func() { fired[i], errs[i] = r.FireDue(ctx, p.through) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Append(ctx, f.name+"src-mark", varve.Any, varve.NewEvent("mark", nil)); err != nil {
			t.Fatal(err)
		}
		got := firings(t, f, a, f.last(t, f.name+"src-mark"))
		slices.Sort(got)
		if fired[0]+fired[1] != 22 || len(got) != 22 || len(slices.Compact(got)) != 22 {
			t.Fatalf("fired %v, recorded %d; want 22 distinct", fired, len(got))
		}
	})
}

// Random schedules, reschedules and cancels between FireDue calls, with
// budgets of 1 to 4 timers: each call fires exactly the timers a plain map
// says are pending and due.
func TestTimerIndexAgainstModel(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 41))
			f := newFixture(t, teststore.Kinds[0])
			r, err := NewRunnerConfig(f.store, tickDef(f.name), f.recv, Config{Clock: f.clock, TimerIndexCount: 1 + rng.IntN(4)})
			if err != nil {
				t.Fatal(err)
			}
			pending := map[string]int{} // stream|timer -> minutes after t0
			fired := map[string]bool{}
			now, next := 0, 0
			for range 12 {
				for range rng.IntN(8) {
					var inst, timer string
					min := now + rng.IntN(20)
					keys := slices.Sorted(maps.Keys(pending))
					switch op := rng.IntN(4); {
					case op < 2 || len(keys) == 0:
						inst, timer = fmt.Sprintf("i%d", rng.IntN(5)), fmt.Sprintf("t%d", next)
						next++
					default:
						inst, timer, _ = strings.Cut(strings.TrimPrefix(keys[rng.IntN(len(keys))], r.Stream("")), "|")
						if op == 3 {
							min = -1
						}
					}
					if err := r.Handle(ctx, f.input(t, "Tick", fmt.Sprintf("%s|%s|%d", inst, timer, min))); err != nil {
						t.Fatal(err)
					}
					key := r.Stream(inst) + "|" + timer
					if delete(pending, key); min >= 0 {
						pending[key] = min
					}
				}
				now += rng.IntN(10)
				f.clock.Add(time.Duration(now)*time.Minute - f.clock.Now().Sub(t0))
				want := 0
				for k, m := range pending {
					if m <= now {
						delete(pending, k)
						fired[k] = true
						want++
					}
				}
				if n, err := r.FireDue(ctx, varve.Start); err != nil || n != want {
					t.Fatalf("at minute %d: fired %d, %v; want %d", now, n, err, want)
				}
			}
			got := firings(t, f, r, varve.Start)
			for _, g := range got {
				if !fired[g] {
					t.Fatalf("fired %s, not due or twice", g)
				}
				delete(fired, g)
			}
			if len(fired) > 0 {
				t.Fatalf("not fired: %v", fired)
			}
		})
	}
}

// A timer whose Decide fails does not hold up the others, also past the
// budget, and is tried again on each call (on memory: the index does not
// depend on the backend).
func TestTimerIndexFailingTimer(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, teststore.Kinds[0])
	def := tickDef(f.name)
	decide := def.Decide
	errPoison := errors.New("poison")
	poison := uuid.NewSHA1(ns, []byte(f.name+"-i3\x00timer\x00t0"))
	def.Decide = func(s struct{}, in Input) (Decision, error) {
		if in.ID == poison {
			return Decision{}, errPoison
		}
		return decide(s, in)
	}
	r, err := NewRunnerConfig(f.store, def, f.recv, Config{Clock: f.clock, TimerIndexCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := tick(t, f, r)
	f.clock.Add(31 * time.Minute)
	for range 2 {
		n, err := r.FireDue(ctx, p.through)
		if !errors.Is(err, errPoison) {
			t.Fatalf("err = %v, want the poison", err)
		}
		if total := len(firings(t, f, r, p.through)); total != 21 {
			t.Fatalf("fired %d (this call %d), want the 21 others", total, n)
		}
		if st := r.TimerIndex(); st.Timers != 1 {
			t.Fatalf("index %+v; want the poisoned timer kept", st)
		}
	}
}
