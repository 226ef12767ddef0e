package retention_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/retention"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t *testing.T) *varve.Store {
	t.Helper()
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// appendN appends n events to stream, one append each, and returns them
// as recorded.
func appendN(t *testing.T, s *varve.Store, stream string, n int) []varve.RecordedEvent {
	t.Helper()
	for range n {
		if _, err := s.Append(t.Context(), stream, varve.Any, varve.NewEvent("E", []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	return read(t, s, stream)
}

func read(t *testing.T, s *varve.Store, stream string) []varve.RecordedEvent {
	t.Helper()
	var out []varve.RecordedEvent
	for e, err := range s.ReadStream(t.Context(), stream) {
		if errors.Is(err, varve.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// versions returns the first and last version of stream; 0, 0 when it
// has no events.
func versions(t *testing.T, s *varve.Store, stream string) (first, last varve.Version) {
	t.Helper()
	evs := read(t, s, stream)
	if len(evs) == 0 {
		return 0, 0
	}
	return evs[0].Version, evs[len(evs)-1].Version
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		p    retention.Policy
		ok   bool
		text string
	}{
		{retention.Policy{}, true, "no limit"},
		{retention.Policy{MaxAge: time.Hour, MaxCount: 3}, true, "max age 1h0m0s, max count 3"},
		{retention.Policy{TruncateBefore: 7, AllowEmpty: true}, true, "before version 7, may remove the last event"},
		{retention.Policy{MaxAge: -time.Second}, false, ""},
		{retention.Policy{MaxCount: -1}, false, ""},
	}
	for _, tc := range tests {
		err := tc.p.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, varve.ErrInvalidArgument)) {
			t.Errorf("%+v: Validate = %v", tc.p, err)
		}
		if tc.ok && tc.p.String() != tc.text {
			t.Errorf("%+v: String = %q, want %q", tc.p, tc.p.String(), tc.text)
		}
	}
}

func TestTargetCheck(t *testing.T) {
	tests := []struct {
		target retention.Target
		ok     bool
	}{
		{retention.Target{Stream: "order-1"}, true},
		{retention.Target{Category: "order"}, true},
		{retention.Target{}, false},
		{retention.Target{Stream: "order-1", Category: "order"}, false},
		{retention.Target{Stream: "$retention"}, false},
		{retention.Target{Stream: "$all"}, false},
		{retention.Target{Category: "$parked"}, false},
		{retention.Target{Category: "order-x"}, false}, // holds the separator
		{retention.Target{Category: "a\x00b"}, false},
		{retention.Target{Category: "\xff"}, false},
		{retention.Target{Category: strings.Repeat("c", varve.MaxStreamIDLen+1)}, false},
	}
	for _, tc := range tests {
		err := tc.target.Check("-")
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, varve.ErrInvalidArgument)) {
			t.Errorf("%q/%q: Check = %v", tc.target.Stream, tc.target.Category, err)
		}
	}
}

// TestSetListRemove: policies are kept in the store, listed categories
// first, replaced, removed; setting the same policy again writes nothing;
// the policies stream keeps its last KeptPolicySets sets.
func TestSetListRemove(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	if rules, err := retention.List(ctx, s); err != nil || len(rules) != 0 {
		t.Fatalf("List of a new store: %v, %v", rules, err)
	}
	order := retention.Target{Category: "order"}
	one := retention.Target{Stream: "order-1"}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(retention.Set(ctx, s, one, retention.Policy{MaxCount: 10}))
	must(retention.Set(ctx, s, order, retention.Policy{MaxAge: time.Hour}))
	info, _ := s.StreamInfo(ctx, retention.PoliciesStream)
	must(retention.Set(ctx, s, order, retention.Policy{MaxAge: time.Hour}))
	if again, _ := s.StreamInfo(ctx, retention.PoliciesStream); again.Version != info.Version {
		t.Fatalf("setting the same policy wrote: version %d, then %d", info.Version, again.Version)
	}
	rules, err := retention.List(ctx, s)
	must(err)
	if len(rules) != 2 || rules[0].Target != order || rules[1].Target != one || rules[1].Policy.MaxCount != 10 || rules[0].Policy.MaxAge != time.Hour || rules[0].UpdatedAt.IsZero() {
		t.Fatalf("rules: %+v", rules)
	}
	must(retention.Set(ctx, s, one, retention.Policy{MaxCount: 20}))
	must(retention.Remove(ctx, s, order))
	if err := retention.Remove(ctx, s, order); !errors.Is(err, retention.ErrNoPolicy) {
		t.Fatalf("removing a policy twice: %v", err)
	}
	rules, err = retention.List(ctx, s)
	must(err)
	if len(rules) != 1 || rules[0].Target != one || rules[0].Policy.MaxCount != 20 {
		t.Fatalf("rules after a change and a removal: %+v", rules)
	}
	for i := range 3 * retention.KeptPolicySets {
		must(retention.Set(ctx, s, one, retention.Policy{MaxCount: int64(30 + i)}))
	}
	if first, last := versions(t, s, retention.PoliciesStream); last-first+1 != retention.KeptPolicySets {
		t.Fatalf("the policies stream keeps versions %d..%d, want the last %d", first, last, retention.KeptPolicySets)
	}
	for _, bad := range []struct {
		target retention.Target
		p      retention.Policy
	}{
		{retention.Target{Stream: "$x"}, retention.Policy{}},
		{one, retention.Policy{MaxCount: -1}},
		{retention.Target{}, retention.Policy{}},
	} {
		if err := retention.Set(ctx, s, bad.target, bad.p); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("Set(%+v, %+v) = %v, want ErrInvalidArgument", bad.target, bad.p, err)
		}
	}
}

// TestPoliciesTruncatedWhole: a policies stream that an operator truncated
// past its last set (which retention never does) is an error, not an empty
// set nor a wait.
func TestPoliciesTruncatedWhole(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	if err := retention.Set(ctx, s, retention.Target{Stream: "s-1"}, retention.Policy{MaxCount: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.System().Truncate(ctx, retention.PoliciesStream, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := retention.List(ctx, s); err == nil || !strings.Contains(err.Error(), "no event") {
		t.Fatalf("List = %v, want the error of a stream without events", err)
	}
	if err := retention.Set(ctx, s, retention.Target{Stream: "s-2"}, retention.Policy{MaxCount: 1}); err == nil {
		t.Fatal("Set over a policies stream truncated whole succeeded")
	}
}

// TestSetConcurrent: changes from many goroutines all land.
func TestSetConcurrent(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			errs <- retention.Set(ctx, s, retention.Target{Stream: fmt.Sprintf("s-%02d", i)}, retention.Policy{MaxCount: int64(i + 1)})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rules, err := retention.List(ctx, s)
	if err != nil || len(rules) != 16 {
		t.Fatalf("%d rules after 16 concurrent sets (%v)", len(rules), err)
	}
	for i, r := range rules {
		if r.Target.Stream != fmt.Sprintf("s-%02d", i) || r.Policy.MaxCount != int64(i+1) {
			t.Fatalf("rule %d: %+v", i, r)
		}
	}
}

// TestScavengeRules applies each kind of policy with an injected clock and
// checks the versions each stream keeps, exactly.
func TestScavengeRules(t *testing.T) {
	type stream struct {
		id string
		n  int
	}
	tests := []struct {
		name    string
		streams []stream
		rules   []retention.Rule
		// ageAt, when > 0, sets the clock so that the events from that
		// version of each stream on are not older than MaxAge.
		ageAt varve.Version
		want  map[string][2]varve.Version // first and last version kept; 0,0: none
	}{
		{"max count", []stream{{"a-1", 10}}, []retention.Rule{{Target: retention.Target{Stream: "a-1"}, Policy: retention.Policy{MaxCount: 3}}}, 0,
			map[string][2]varve.Version{"a-1": {8, 10}}},
		{"max count above the length", []stream{{"a-1", 3}}, []retention.Rule{{Target: retention.Target{Stream: "a-1"}, Policy: retention.Policy{MaxCount: 5}}}, 0,
			map[string][2]varve.Version{"a-1": {1, 3}}},
		{"truncate before", []stream{{"a-1", 10}}, []retention.Rule{{Target: retention.Target{Stream: "a-1"}, Policy: retention.Policy{TruncateBefore: 4}}}, 0,
			map[string][2]varve.Version{"a-1": {4, 10}}},
		{"truncate before past the end keeps the last", []stream{{"a-1", 5}}, []retention.Rule{{Target: retention.Target{Stream: "a-1"}, Policy: retention.Policy{TruncateBefore: 50}}}, 0,
			map[string][2]varve.Version{"a-1": {5, 5}}},
		{"truncate before past the end, allow empty", []stream{{"a-1", 5}}, []retention.Rule{{Target: retention.Target{Stream: "a-1"}, Policy: retention.Policy{TruncateBefore: 50, AllowEmpty: true}}}, 0,
			map[string][2]varve.Version{"a-1": {0, 0}}},
		{"max age", []stream{{"a-1", 10}}, []retention.Rule{{Target: retention.Target{Stream: "a-1"}, Policy: retention.Policy{MaxAge: time.Hour}}}, 6,
			map[string][2]varve.Version{"a-1": {6, 10}}},
		{"max age, all old", []stream{{"a-1", 10}}, []retention.Rule{{Target: retention.Target{Stream: "a-1"}, Policy: retention.Policy{MaxAge: time.Hour}}}, 11,
			map[string][2]varve.Version{"a-1": {10, 10}}},
		{"max age, all old, allow empty", []stream{{"a-1", 10}}, []retention.Rule{{Target: retention.Target{Stream: "a-1"}, Policy: retention.Policy{MaxAge: time.Hour, AllowEmpty: true}}}, 11,
			map[string][2]varve.Version{"a-1": {0, 0}}},
		{"the strictest limit wins", []stream{{"a-1", 10}}, []retention.Rule{{Target: retention.Target{Stream: "a-1"}, Policy: retention.Policy{MaxAge: time.Hour, MaxCount: 8, TruncateBefore: 2}}}, 5,
			map[string][2]varve.Version{"a-1": {5, 10}}},
		{"category, a stream of its own policy, the exempt one", []stream{{"a", 4}, {"a-1", 10}, {"a-2", 10}, {"a-3", 10}, {"ab-1", 10}, {"b-1", 10}},
			[]retention.Rule{
				{Target: retention.Target{Category: "a"}, Policy: retention.Policy{MaxCount: 2}},
				{Target: retention.Target{Stream: "a-2"}, Policy: retention.Policy{MaxCount: 5}},
				{Target: retention.Target{Stream: "a-3"}, Policy: retention.Policy{}},
			}, 0,
			map[string][2]varve.Version{"a": {3, 4}, "a-1": {9, 10}, "a-2": {6, 10}, "a-3": {1, 10}, "ab-1": {1, 10}, "b-1": {1, 10}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s := newStore(t)
			recorded := map[string][]varve.RecordedEvent{}
			for _, st := range tc.streams {
				recorded[st.id] = appendN(t, s, st.id, st.n)
			}
			now := time.Now().Add(24 * time.Hour)
			if tc.ageAt > 0 {
				// The clock is MaxAge after the event at ageAt (after the
				// last event when ageAt is past the end), so that it and
				// those after it are not older than MaxAge. Two events
				// recorded at the same time would move the cut to the
				// first of them: the expected cut is computed from the
				// times as recorded.
				id := tc.streams[0].id
				evs := recorded[id]
				at := evs[len(evs)-1].RecordedAt.Add(time.Nanosecond)
				if int(tc.ageAt) <= len(evs) {
					at = evs[tc.ageAt-1].RecordedAt
				}
				now = at.Add(tc.rules[0].Policy.MaxAge)
				if want := tc.want[id]; want[0] != 0 && int(want[0]) < len(evs) {
					for _, e := range evs {
						if !e.RecordedAt.Before(at) {
							want[0] = min(want[0], e.Version)
							break
						}
					}
					tc.want[id] = want
				}
			}
			for _, r := range tc.rules {
				if err := retention.Set(ctx, s, r.Target, r.Policy); err != nil {
					t.Fatal(err)
				}
			}
			sc, err := retention.New(retention.Config{Store: s, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := sc.ScavengeOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			removed := int64(0)
			for id, want := range tc.want {
				first, last := versions(t, s, id)
				if first != want[0] || last != want[1] {
					t.Errorf("%s keeps %d..%d, want %d..%d", id, first, last, want[0], want[1])
				}
				n := 0
				for _, st := range tc.streams {
					if st.id == id {
						n = st.n
					}
				}
				if want[0] == 0 {
					removed += int64(n)
				} else {
					removed += int64(want[0]) - 1
				}
				if info, err := s.StreamInfo(ctx, id); err != nil || info.Version != varve.Version(n) {
					t.Errorf("%s: version %d after the pass (%v), want %d", id, info.Version, err, n)
				}
			}
			if rep.Removed != removed || rep.Errors != 0 || rep.Incomplete || rep.Rules != len(tc.rules) {
				t.Errorf("report %+v, want %d removed, no errors", rep, removed)
			}
			// A second pass finds nothing more to do.
			again, err := sc.ScavengeOnce(ctx)
			if err != nil || again.Removed != 0 || again.Truncated != 0 {
				t.Errorf("second pass: %+v, %v", again, err)
			}
			last, ok, err := retention.LastReport(ctx, s)
			if err != nil || !ok || last.Position != again.Position || last.Started != again.Started {
				t.Errorf("last report %+v (%v, %v), want the second pass's %+v", last, ok, err, again)
			}
		})
	}
}

// TestScavengeBudget: a pass stops when it has removed MaxRemove events or
// read MaxReadBytes, says it is incomplete, and the next goes on; a stream
// with more than TruncateStep events to go is truncated in steps.
func TestScavengeBudget(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	for range 3 {
		evs := make([]varve.Event, 9000)
		for i := range evs {
			evs[i] = varve.NewEvent("E", nil)
		}
		if _, err := s.Append(ctx, "big-1", varve.Any, evs...); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, s, "big-2", 10)
	if err := retention.Set(ctx, s, retention.Target{Category: "big"}, retention.Policy{MaxCount: 1}); err != nil {
		t.Fatal(err)
	}
	var steps []varve.Version
	sc, err := retention.New(retention.Config{Store: s, MaxRemove: 26_000, Hooks: retention.Hooks{BeforeTruncate: func(stream string, before varve.Version) {
		if stream == "big-1" {
			steps = append(steps, before)
		}
	}}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sc.ScavengeOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Incomplete || rep.Removed != 26_000 || fmt.Sprint(steps) != "[10001 20001 26001]" {
		t.Fatalf("first pass: %+v, truncation steps %v", rep, steps)
	}
	if first, _ := versions(t, s, "big-2"); first != 1 {
		t.Fatalf("big-2 was truncated by a pass whose budget was spent: first version %d", first)
	}
	rep, err = sc.ScavengeOnce(ctx)
	if err != nil || rep.Incomplete || rep.Removed != 999+9 {
		t.Fatalf("second pass: %+v, %v", rep, err)
	}

	// The read budget: an age scan stops after MaxReadBytes.
	for range 20 {
		if _, err := s.Append(ctx, "aged-1", varve.Any, varve.NewEvent("E", make([]byte, 100))); err != nil {
			t.Fatal(err)
		}
	}
	if err := retention.Set(ctx, s, retention.Target{Stream: "aged-1"}, retention.Policy{MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	sc, err = retention.New(retention.Config{Store: s, MaxReadBytes: 500, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = sc.ScavengeOnce(ctx)
	if err != nil || !rep.Incomplete || rep.ReadBytes != 500 || rep.Removed != 5 {
		t.Fatalf("pass with a read budget of 500 bytes over events of 100: %+v, %v", rep, err)
	}
}

// TestScavengeWrittenAgain: a stream deleted and written again past its
// old version between a pass's cut and its truncation keeps its new
// events: the cut was made for the events before.
func TestScavengeWrittenAgain(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	appendN(t, s, "again-1", 10)
	if err := retention.Set(ctx, s, retention.Target{Stream: "again-1"}, retention.Policy{MaxCount: 2}); err != nil {
		t.Fatal(err)
	}
	var cuts []varve.Version
	sc, err := retention.New(retention.Config{Store: s, Hooks: retention.Hooks{BeforeTruncate: func(stream string, before varve.Version) {
		cuts = append(cuts, before)
		if len(cuts) > 1 {
			return
		}
		if err := s.Delete(ctx, stream, varve.Any); err != nil {
			t.Error(err)
		}
		appendN(t, s, stream, 12)
	}}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sc.ScavengeOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first, last := versions(t, s, "again-1"); first != 1 || last != 12 || rep.Removed != 0 || fmt.Sprint(cuts) != "[9]" {
		t.Fatalf("after a pass whose stream was written again: versions %d..%d, report %+v, cuts %v", first, last, rep, cuts)
	}
	rep, err = sc.ScavengeOnce(ctx)
	if first, last := versions(t, s, "again-1"); err != nil || first != 11 || last != 12 || rep.Removed != 10 {
		t.Fatalf("the next pass: versions %d..%d, report %+v, %v", first, last, rep, err)
	}
}

// TestScavengeLease: a pass needs the lease; one held elsewhere fails the
// pass with ErrLeaseHeld and records nothing.
func TestScavengeLease(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	held, err := s.Leases().Acquire(ctx, retention.DefaultLease, "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := retention.New(retention.Config{Store: s, Holder: "me"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ScavengeOnce(ctx); !errors.Is(err, varve.ErrLeaseHeld) {
		t.Fatalf("pass under another's lease: %v", err)
	}
	if _, ok, err := retention.LastReport(ctx, s); ok || err != nil {
		t.Fatalf("a refused pass recorded a report (%v)", err)
	}
	if err := s.Leases().Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	rep, err := sc.ScavengeOnce(ctx)
	if err != nil || rep.Holder != "me" {
		t.Fatalf("pass once the lease is free: %+v, %v", rep, err)
	}
	// The pass released the lease.
	if leases, err := s.Leases().List(ctx, retention.DefaultLease); err != nil || len(leases) != 0 {
		t.Fatalf("leases after the pass: %+v, %v", leases, err)
	}
}

// TestRun: Run makes passes until its context ends, then returns nil; the
// runs stream keeps the last KeptReports reports.
func TestRun(t *testing.T) {
	s := newStore(t)
	appendN(t, s, "r-1", 3)
	if err := retention.Set(t.Context(), s, retention.Target{Stream: "r-1"}, retention.Policy{MaxCount: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	passes := 0
	sc, err := retention.New(retention.Config{Store: s, Interval: time.Millisecond, Hooks: retention.Hooks{AfterPass: func(r retention.Report, err error) {
		if err != nil && ctx.Err() == nil {
			t.Errorf("pass: %v", err)
		}
		if passes++; passes == retention.KeptReports+5 {
			cancel()
		}
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if first, last := versions(t, s, retention.RunsStream); last-first+1 != retention.KeptReports {
		t.Fatalf("the runs stream keeps %d..%d, want the last %d", first, last, retention.KeptReports)
	}
	if first, _ := versions(t, s, "r-1"); first != 3 {
		t.Fatalf("r-1 starts at %d, want 3", first)
	}
}

// TestConfig: a bad configuration is ErrInvalidArgument.
func TestConfig(t *testing.T) {
	s := newStore(t)
	for _, cfg := range []retention.Config{
		{},
		{Store: s, Interval: -1},
		{Store: s, LeaseTTL: time.Millisecond},
		{Store: s, Lease: "a\x00b"},
		{Store: s, MaxRemove: -1},
	} {
		if _, err := retention.New(cfg); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v, want ErrInvalidArgument", cfg, err)
		}
	}
}

// TestDryRun: a dry run reports what a pass would remove and removes,
// records and holds nothing.
func TestDryRun(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	appendN(t, s, "d-1", 10)
	if err := retention.Set(ctx, s, retention.Target{Stream: "d-1"}, retention.Policy{MaxCount: 3}); err != nil {
		t.Fatal(err)
	}
	held, err := s.Leases().Acquire(ctx, retention.DefaultLease, "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Leases().Release(ctx, held) }()
	sc, err := retention.New(retention.Config{Store: s, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sc.ScavengeOnce(ctx)
	if err != nil || rep.Removed != 7 || rep.Truncated != 1 || len(rep.Truncations) != 1 || rep.Truncations[0] != (retention.Truncation{Stream: "d-1", Before: 8, Removed: 7}) {
		t.Fatalf("dry run: %+v, %v", rep, err)
	}
	if first, last := versions(t, s, "d-1"); first != 1 || last != 10 {
		t.Fatalf("a dry run truncated: %d..%d left", first, last)
	}
	if _, ok, err := retention.LastReport(ctx, s); ok || err != nil {
		t.Fatalf("a dry run recorded a report (%v)", err)
	}
}

// cutAcquire is a memory backend whose lease acquisitions take the lease
// and then answer that the context ended, as a call cut off in flight
// after the server granted it.
type cutAcquire struct {
	*memory.Backend
	cancel context.CancelFunc
	cut    bool
}

func (b *cutAcquire) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (varve.Lease, error) {
	l, err := b.Backend.AcquireLease(ctx, name, holder, ttl)
	if err != nil || !b.cut {
		return l, err
	}
	b.cut = false
	b.cancel()
	return varve.Lease{}, context.Canceled
}

// TestLeaseCutOff: a pass whose acquisition of the lease was cut off by
// its context gives back the lease it may have got, so that the next
// scavenger does not wait for its TTL.
func TestLeaseCutOff(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	b := &cutAcquire{Backend: memory.New(), cancel: cancel, cut: true}
	s, err := varve.New(b, varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sc, err := retention.New(retention.Config{Store: s, Holder: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ScavengeOnce(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a pass whose acquisition was cut off: %v", err)
	}
	if leases, err := s.Leases().List(t.Context(), retention.DefaultLease); err != nil || len(leases) != 0 {
		t.Fatalf("leases after the cut-off pass: %+v, %v", leases, err)
	}
	other, err := retention.New(retention.Config{Store: s, Holder: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ScavengeOnce(t.Context()); err != nil {
		t.Fatalf("the next scavenger: %v", err)
	}
}
