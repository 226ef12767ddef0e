package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varve-go/varve"
)

// A short sustained run on memory at a steady rate: memory stays flat,
// pruning keeps the data set bounded, nothing fails. A slope projected over
// 10 minutes from a few seconds is noise, so the smoke tests judge against a
// floor of 64 MiB/min: paced leak-free runs measured within +-13 MiB/min, the
// leaking run below 340-430 MiB/min of live heap. A real soak runs minutes
// with the default 1% and no floor.
func TestSoakFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("soak smoke test takes seconds")
	}
	rep, err := RunSoak(context.Background(), SoakConfig{
		Store: "memory:", Duration: 4 * time.Second, Interval: 100 * time.Millisecond,
		PruneAbove: 500, Aggregates: 200, Workers: 2, Rate: 2000, ThresholdPct: 1, MinSlope: smokeFloor, MinSpan: time.Second, Mode: Sustained,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 0 {
		t.Fatalf("%d errors, first: %s", rep.Errors, rep.FirstError)
	}
	if rep.Ops == 0 || rep.Appended == 0 || rep.CaughtUp == 0 || rep.Pruned == 0 {
		t.Fatalf("workload did not run fully: %+v", rep)
	}
	for _, tr := range rep.Verdict.Trends {
		t.Logf("%s: %.1f MiB/min (floor %d MiB/min)", tr.Name, tr.SlopePerMin/(1<<20), smokeFloor>>20)
	}
	if !rep.Verdict.Flat {
		t.Fatalf("leak-free run judged not flat: %+v", rep.Verdict)
	}
	if len(rep.Samples) < 20 {
		t.Fatalf("%d samples in 4s at 100ms", len(rep.Samples))
	}
	if l := rep.Latency; l.Samples == 0 || l.P50 <= 0 || l.P99 < l.P50 {
		t.Fatalf("command latency %+v", l)
	}
}

// The same run with a workload that leaks on purpose must be flagged under
// the same threshold.
func TestSoakLeakFlagged(t *testing.T) {
	if testing.Short() {
		t.Skip("soak smoke test takes seconds")
	}
	var (
		mu   sync.Mutex
		leak [][]byte
	)
	rep, err := RunSoak(context.Background(), SoakConfig{
		Store: "memory:", Duration: 4 * time.Second, Interval: 100 * time.Millisecond,
		PruneAbove: 500, Aggregates: 200, Workers: 2, Rate: 2000, ThresholdPct: 1, MinSlope: smokeFloor, MinSpan: time.Second, Mode: Sustained,
		onOp: func() {
			mu.Lock()
			leak = append(leak, make([]byte, 4096))
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Verdict.Trends {
		t.Logf("%s: %.1f MiB/min (floor %d MiB/min)", tr.Name, tr.SlopePerMin/(1<<20), smokeFloor>>20)
	}
	if rep.Verdict.Flat {
		t.Fatalf("leaking run (%d MiB kept) judged flat: %+v", len(leak)*4096>>20, rep.Verdict)
	}
	grew := false
	for _, tr := range rep.Verdict.Trends {
		grew = grew || tr.ExceedsThresh
	}
	if !grew {
		t.Fatalf("no trend flagged: %+v", rep.Verdict)
	}
}

const smokeFloor = 64 << 20 // bytes per minute

func TestJudge(t *testing.T) {
	mk := func(f func(i int) uint64) []MemSample {
		var s []MemSample
		for i := range 60 {
			s = append(s, MemSample{At: time.Duration(i) * time.Second, HeapLive: f(i), RSS: f(i), Goroutines: 5})
		}
		return s
	}
	cases := []struct {
		name string
		f    func(int) uint64
		flat bool
	}{
		{"constant", func(int) uint64 { return 100 << 20 }, true},
		{"sawtooth", func(i int) uint64 { return 100<<20 + uint64(i%5)<<16 }, true},
		{"growing 1 MiB/s", func(i int) uint64 { return 100<<20 + uint64(i)<<20 }, false},
	}
	for _, tc := range cases {
		if got := Judge(mk(tc.f), 1, 0, time.Second).Flat; got != tc.flat {
			t.Errorf("%s: flat=%v, want %v", tc.name, got, tc.flat)
		}
	}
	grow := mk(func(int) uint64 { return 1 << 20 })
	grow[len(grow)-1].Goroutines = 50
	if v := Judge(grow, 1, 0, time.Second); v.Flat || !v.GoroutineGrowth || v.Status != Growing {
		t.Errorf("goroutine growth not flagged: %+v", v)
	}
	// A run too short to judge: growing fast, but over too little time or
	// too few samples, it is "insufficient data", never "growing".
	steep := mk(func(i int) uint64 { return 1<<20 + uint64(i)<<22 })
	if v := Judge(steep, 1, 0, 2*time.Minute); v.Status != Insufficient || v.Flat || len(v.Trends) != 0 {
		t.Errorf("a 30 s half judged against a 2 min minimum: %+v", v)
	}
	if v := Judge(steep[:12], 1, 0, time.Second); v.Status != Insufficient {
		t.Errorf("6 samples judged: %+v", v)
	}
}

func TestSoakRefusesZeros(t *testing.T) {
	base := SoakConfig{Store: "memory:", Mode: Sustained, Duration: time.Second, Interval: time.Second, PruneAbove: 1, Workers: 1, Aggregates: 1}
	for _, mutate := range []func(*SoakConfig){
		func(c *SoakConfig) { c.Workers = 0 },
		func(c *SoakConfig) { c.Aggregates = 0 },
		func(c *SoakConfig) { c.PruneAbove = 0 },
		func(c *SoakConfig) { c.Interval = 0 },
		func(c *SoakConfig) { c.Duration = 0 },
		func(c *SoakConfig) { c.Mode = "" },
	} {
		cfg := base
		mutate(&cfg)
		if _, err := RunSoak(t.Context(), cfg); !errors.Is(err, varve.ErrInvalidArgument) {
			t.Errorf("config %+v: %v, want ErrInvalidArgument", cfg, err)
		}
	}
}

// Discovery stops near the memory limit with its ceiling in the report,
// and the record a capped child writes rebuilds the same run: every sample
// the monitor passed on, the counts of the last one, a torn last line
// dropped.
func TestSoakDiscoveryRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("soak smoke test takes seconds")
	}
	var rec bytes.Buffer
	rep, err := RunSoak(context.Background(), SoakConfig{
		Store: "memory:", Duration: 2 * time.Minute, Interval: 50 * time.Millisecond, MemoryLimit: 8 << 20,
		PruneAbove: 500, Aggregates: 1000, Workers: 2, ThresholdPct: 1, Mode: Discovery, Record: &rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Ceiling
	if !strings.Contains(rep.StopReason, "90% of the memory limit") || c == nil || c.HeapLive < 8<<20*9/10 || c.LiveEvents != rep.LiveEvents || rep.Pruned != 0 {
		t.Fatalf("discovery: stopped %q, ceiling %+v, %d live events, %d pruned", rep.StopReason, c, rep.LiveEvents, rep.Pruned)
	}
	var text strings.Builder
	if err := PrintSoak(&text, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), fmt.Sprintf("holding %d events", c.LiveEvents)) {
		t.Errorf("the table lacks the ceiling:\n%s", text.String())
	}
	lines := rec.String()
	got, err := ReadRecord(strings.NewReader(lines + `{"mem":{"at_ns":99`))
	if err != nil {
		t.Fatal(err)
	}
	// The monitor passes on every sample but the one taken as the run ends,
	// and a discovery run that reached the limit ends at the sample that
	// reached it: the record holds every sample of the run.
	if len(got) != len(rep.Samples) || len(got) == 0 {
		t.Fatalf("%d recorded samples, the run took %d", len(got), len(rep.Samples))
	}
	back := SoakFromRecord(SoakReport{Mode: Discovery}, got, 1, 0, time.Second)
	last := got[len(got)-1]
	if len(back.Samples) != len(got) || back.Ops != last.Counts.Ops || back.LiveEvents != last.Counts.LiveEvents ||
		back.Ceiling == nil || back.Ceiling.HeapLive != last.Mem.HeapLive || back.Elapsed != last.Mem.At {
		t.Errorf("rebuilt from the record: %d samples, %d ops, %d live, ceiling %+v, elapsed %v; last recorded %+v",
			len(back.Samples), back.Ops, back.LiveEvents, back.Ceiling, back.Elapsed, last)
	}
}
