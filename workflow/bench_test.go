package workflow

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// benchKinds are the backends the benchmarks run on (PostgreSQL needs the
// server, as the tests do).
var benchKinds = teststore.Kinds[:3]

// BenchmarkStep: one workflow step (load the instance, Decide, one append of
// inbox + state + outbox + timer) per op, on a new instance each op, against
// the baseline of appending the same four events to a new stream directly.
//
//	go test -run '^$' -bench Step -count 3 ./workflow
func BenchmarkStep(b *testing.B) {
	ctx := context.Background()
	for _, k := range benchKinds {
		b.Run(k.Name+"/append-baseline", func(b *testing.B) {
			store := k.Open(b, varve.Config{})
			for i := 0; b.Loop(); i++ {
				evs := []varve.Event{varve.NewEvent("a", []byte(`{}`)), varve.NewEvent("b", nil), varve.NewEvent("c", []byte(`{}`)), varve.NewEvent("d", []byte(`{}`))}
				if _, err := store.Append(ctx, fmt.Sprintf("base-%d", i), varve.NoStream, evs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
		b.Run(k.Name+"/step", func(b *testing.B) {
			store := k.Open(b, varve.Config{})
			r, err := NewRunner(store, orderDef("bench"), nil, &fakeClock{now: t0})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				e := varve.RecordedEvent{ID: varve.NewEventID(), Type: "OrderPlaced", Data: []byte(fmt.Sprint(i))}
				if err := r.Handle(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// BenchmarkTimerLateness: per op, 100 instances each schedule one timer due
// 50-250 ms after its step, one step every 20 ms at most (50 steps/s, well
// below what every backend sustains, so that the figures are of precision,
// not of a backlog), while a loop calls FireDue every interval on the
// system clock, until all 100 have fired.
// A timer's lateness runs from its due time to the return of the FireDue
// call that fired it (its append committed); p50 and p99 are over every op.
// budget=4 caps the index at 4 timers (about 13 are pending at a time), so FireDue re-reads $all for the
// rest.
//
//	go test -run '^$' -bench TimerLateness -count 3 ./workflow
func BenchmarkTimerLateness(b *testing.B) {
	const timers, pace = 100, 20 * time.Millisecond
	for _, k := range benchKinds {
		for _, c := range []struct {
			interval time.Duration
			budget   int
		}{{10 * time.Millisecond, 0}, {10 * time.Millisecond, 4}, {50 * time.Millisecond, 0}} {
			name := fmt.Sprintf("%s/interval=%s", k.Name, c.interval)
			if c.budget > 0 {
				name += fmt.Sprintf("/budget=%d", c.budget)
			}
			b.Run(name, func(b *testing.B) {
				store := k.Open(b, varve.Config{})
				lt := &lateness{}
				r, err := NewRunnerConfig(store, lt.def(fmt.Sprintf("late%x", rand.Uint64())), nil, Config{TimerIndexCount: c.budget})
				if err != nil {
					b.Fatal(err)
				}
				for round := 0; b.Loop(); round++ {
					if err := lt.round(r, round, timers, pace, c.interval); err != nil {
						b.Fatal(err)
					}
				}
				slices.Sort(lt.late)
				q := func(p float64) float64 {
					return float64(lt.late[int(p*float64(len(lt.late)-1))]) / float64(time.Millisecond)
				}
				b.ReportMetric(q(0.50), "p50-late-ms")
				b.ReportMetric(q(0.99), "p99-late-ms")
				b.ReportMetric(float64(r.TimerIndex().Rescans)/float64(b.N), "rescans/op")
			})
		}
	}
}

type lateness struct {
	mu      sync.Mutex
	due     map[string]time.Time // instance -> due of its timer
	decided []string             // instances whose timer Decide has seen since the last FireDue
	late    []time.Duration
}

func (l *lateness) def(name string) Definition[struct{}] {
	l.due = map[string]time.Time{}
	return Definition[struct{}]{
		Name:   name,
		Route:  func(e *varve.RecordedEvent) (string, bool) { return string(e.Data), true },
		Evolve: func(s struct{}, _ *varve.RecordedEvent) struct{} { return s },
		Decide: func(_ struct{}, in Input) (Decision, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			inst := string(in.Data)
			if in.Timer != "" {
				l.decided = append(l.decided, in.Timer)
				return Decision{}, nil
			}
			due := time.Now().Add(50*time.Millisecond + rand.N(200*time.Millisecond))
			l.due[inst] = due
			return Decision{Timers: []Timer{{ID: inst, Due: due}}}, nil
		},
	}
}

// round schedules n timers, one per pace at most, while a FireDue loop runs, and returns once all
// have fired; the loop stops before it returns.
func (l *lateness) round(r *Runner[struct{}], round, n int, pace, interval time.Duration) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fired := 0
	loopErr := make(chan error, 1)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for fired < n {
			select {
			case <-ctx.Done():
				loopErr <- ctx.Err()
				return
			case <-tick.C:
			}
			k, err := r.FireDue(ctx, varve.Start)
			if err != nil {
				loopErr <- err
				return
			}
			now := time.Now()
			l.mu.Lock()
			for _, inst := range l.decided {
				l.late = append(l.late, now.Sub(l.due[inst]))
			}
			l.decided = l.decided[:0]
			l.mu.Unlock()
			fired += k
		}
		loopErr <- nil
	}()
	steps := time.NewTicker(pace)
	defer steps.Stop()
	for i := range n {
		<-steps.C
		inst := fmt.Sprintf("r%di%d", round, i)
		if err := r.Handle(ctx, varve.RecordedEvent{ID: varve.NewEventID(), Type: "Start", Data: []byte(inst)}); err != nil {
			cancel()
			<-loopErr
			return err
		}
	}
	return <-loopErr
}
