package lab

import (
	"context"
	"fmt"
	"io"
	"iter"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/workload"
)

// Defaults of a [BenchConfig].
const (
	// DefaultBenchEvents is the budget of a suite workload and of a baseline.
	DefaultBenchEvents = 50_000
	// DefaultBenchDuration caps a suite workload and a baseline.
	DefaultBenchDuration = 5 * time.Second
	// DefaultScaleEvents is the budget of a scale workload; memory stores
	// get DefaultScaleEventsMemory.
	DefaultScaleEvents       = 100_000
	DefaultScaleEventsMemory = 1_000_000
)

// BenchConfig configures [Bench].
type BenchConfig struct {
	// Stores are the stores to measure, one after the other.
	Stores []*Target
	// Workloads are names of workloads or of the groups suite, scale and
	// all; default the suite.
	Workloads []string
	// Events is the budget of every workload and baseline (events, or ops
	// for a workload counted in ops). 0 means DefaultBenchEvents for suite
	// workloads and baselines, and the scale default for scale workloads.
	Events int
	// Duration caps every workload and baseline. 0 means
	// DefaultBenchDuration for suite workloads and baselines and no cap for
	// scale workloads; a negative Duration means no cap at all.
	Duration time.Duration
	// Rate caps every workload at this many ops per second over its
	// workers; 0 means no cap. Baselines run uncapped.
	Rate float64
	// Progress, when not nil, receives a progress line while the run goes
	// on (redrawn in place on a terminal).
	Progress io.Writer
}

// BenchReport is the outcome of a [Bench] run.
type BenchReport struct {
	Varve    string      `json:"varve_version"`
	Machine  MachineInfo `json:"machine"`
	Started  time.Time   `json:"started"`
	Finished time.Time   `json:"finished"`
	// Interrupted is set when the run was stopped before its end; the
	// report holds what was measured until then.
	Interrupted bool `json:"interrupted"`
	// Events, Duration and Rate are the config's values as given (0 =
	// defaults).
	Events    int             `json:"events"`
	Duration  time.Duration   `json:"duration_ns"`
	Rate      float64         `json:"rate"`
	Workloads []BenchWorkload `json:"workloads"`
	Stores    []BenchStore    `json:"stores"`
}

// BenchWorkload describes a workload of the run.
type BenchWorkload struct {
	Name    string        `json:"name"`
	Bench   string        `json:"go_bench_name"`
	About   string        `json:"about"`
	Workers int           `json:"workers"`
	Unit    workload.Unit `json:"unit"`
	Scale   bool          `json:"scale"`
	// Bytes marks a storage workload, whose results say what an event
	// costs on disk.
	Bytes bool `json:"bytes"`
}

// BenchStore is what a run measured on one store.
type BenchStore struct {
	// Name is the store's short label, URL its redacted URL.
	Name    string `json:"name"`
	URL     string `json:"url"`
	Backend string `json:"backend"`
	// ServerVersion is the version of the server or embedded engine, as the
	// baseline's connection reports it; empty when unknown.
	ServerVersion string         `json:"server_version"`
	Features      varve.Features `json:"features"`
	Baseline      *BenchBaseline `json:"baseline"`
	// Concurrent is the baseline of the workloads with as many writers as
	// it has (PostgreSQL: pgbench's 8 clients), nil for a store without.
	Concurrent *BenchBaseline `json:"concurrent_baseline,omitempty"`
	Results    []BenchResult  `json:"results"`
	// Error says why the store's run ended early, if it did.
	Error string `json:"error,omitempty"`
}

// BenchBaseline is a store's raw baseline, measured before and after its
// workloads; ratios are to the mean of the runs.
type BenchBaseline struct {
	Name  string `json:"name"`
	About string `json:"about"`
	// Workers is the number of writers at once, 1 if 0.
	Workers int      `json:"workers,omitempty"`
	Runs    []Result `json:"runs"`
	// EventsPerSec, P50 and P99 are the means over Runs.
	EventsPerSec float64       `json:"events_per_sec"`
	P50          time.Duration `json:"p50_ns"`
	P99          time.Duration `json:"p99_ns"`
	// Spread is the fastest run's events/s over the slowest's: far above
	// 1, the machine was busy and throughput ratios are rough (p50 ratios
	// hold up better).
	Spread float64 `json:"spread"`
	// Error says why there is no baseline, if there is none.
	Error string `json:"error,omitempty"`
}

// BenchResult is one workload on one store.
type BenchResult struct {
	Workload string `json:"workload"`
	Result
	// VsBaseline compares the result with the store's baseline: nil
	// without one, and for workloads that read, which a write baseline
	// does not measure.
	VsBaseline *BenchRatios `json:"vs_baseline"`
	// Bytes is the store's growth on disk over a storage workload; nil for
	// other workloads and for a store that cannot tell its size.
	Bytes *BenchBytes `json:"bytes,omitempty"`
	Error string      `json:"error,omitempty"`
}

// BenchRatios relate a result to its store's baseline: Throughput is the
// workload's events/s (ops/s for a workload counted in ops) over the
// baseline's events/s, so 0.5 keeps half the raw medium's speed; P50 and
// P99 are the workload's latency over the baseline's, so 3 takes three
// times as long as one raw write.
type BenchRatios struct {
	Throughput float64 `json:"throughput"`
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
}

// Bench measures the workloads on each store, each store's baseline before
// and after them, and returns the report. When ctx ends, Bench stops the
// running workload, skips the rest and returns what was measured along with
// an error that wraps ctx's error. A workload that fails is reported with
// its error and the run goes on.
func Bench(ctx context.Context, cfg BenchConfig) (*BenchReport, error) {
	ws, err := workload.Select(cfg.Workloads)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if len(cfg.Stores) == 0 {
		return nil, fmt.Errorf("bench: no store: %w", varve.ErrInvalidArgument)
	}
	if cfg.Events < 0 || cfg.Rate < 0 {
		return nil, fmt.Errorf("bench: %d events at rate %g: %w", cfg.Events, cfg.Rate, varve.ErrInvalidArgument)
	}
	rep := &BenchReport{
		Varve: varveVersion(), Machine: Machine(),
		Started: time.Now(), Events: cfg.Events, Duration: cfg.Duration, Rate: cfg.Rate,
	}
	for _, w := range ws {
		rep.Workloads = append(rep.Workloads, BenchWorkload{
			Name: w.Name, Bench: w.Bench, About: w.About, Workers: w.Workers, Unit: w.Unit, Scale: w.Scale, Bytes: w.Bytes,
		})
	}

	// Open every store first, so that a bad URL fails before anything runs.
	stores := make([]*varve.Store, len(cfg.Stores))
	defer func() {
		for _, s := range stores {
			if s != nil {
				_ = s.Close()
			}
		}
	}()
	for i, t := range cfg.Stores {
		if stores[i], err = Open(ctx, t.URL); err != nil {
			return nil, fmt.Errorf("bench: open store %s: %w", t.Label, err)
		}
	}

	prog := newProgress(cfg.Progress)
	defer prog.stop()
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "bench: %s\n", planText(rep))
	}
	run := throwawayName("")
	for i, s := range stores {
		t := cfg.Stores[i]
		st := BenchStore{Name: t.Label, URL: t.Display, Backend: s.Features().Name, Features: s.Features()}
		stores[i] = nil // measure owns it now
		r := &benchRun{cfg: cfg, ws: ws, url: t.URL, label: t.Label, store: s, prog: prog, prefix: "bench-" + run + "-"}
		r.measure(ctx, &st)
		rep.Stores = append(rep.Stores, st)
		if ctx.Err() != nil {
			break
		}
	}
	rep.Finished = time.Now()
	if ctx.Err() != nil {
		rep.Interrupted = true
		return rep, fmt.Errorf("bench interrupted: %w", context.Cause(ctx))
	}
	return rep, nil
}

// benchRun measures one store.
type benchRun struct {
	cfg    BenchConfig
	ws     []workload.Workload
	url    string // expanded
	label  string // for people
	store  *varve.Store
	prog   *progress
	prefix string
}

// limits returns the budget and time cap of a workload or baseline.
func (r *benchRun) limits(scale bool) (int, time.Duration) {
	events, d := r.cfg.Events, r.cfg.Duration
	if events == 0 {
		events = DefaultBenchEvents
		if scale {
			events = DefaultScaleEvents
			if s, _, _ := strings.Cut(r.url, ":"); s == "memory" || s == "mem" {
				events = DefaultScaleEventsMemory
			}
		}
	}
	switch {
	case d < 0:
		d = 0
	case d == 0 && !scale:
		d = DefaultBenchDuration
	}
	return events, d
}

// measure runs the baseline and the workloads on r.store and closes it.
func (r *benchRun) measure(ctx context.Context, st *BenchStore) {
	defer func() {
		if r.store != nil {
			_ = r.store.Close()
		}
	}()
	bl, err := openBaseline(ctx, r.url)
	if err != nil {
		st.Baseline = &BenchBaseline{Error: Scrub(err.Error())}
		if ctx.Err() != nil {
			return
		}
	} else {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := bl.close(cctx); err != nil {
				st.Error = join(st.Error, Scrub(err.Error()))
			}
		}()
		st.ServerVersion = bl.version
		st.Baseline = &BenchBaseline{Name: bl.name, About: bl.about}
		r.baseline(ctx, bl, nil, "warm-up")
		r.baseline(ctx, bl, st.Baseline, "before")
	}
	cbl, err := openConcurrentBaseline(ctx, r.url)
	switch {
	case err != nil:
		st.Concurrent = &BenchBaseline{Error: Scrub(err.Error())}
	case cbl != nil:
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := cbl.close(cctx); err != nil {
				st.Error = join(st.Error, Scrub(err.Error()))
			}
		}()
		st.Concurrent = &BenchBaseline{Name: cbl.name, About: cbl.about, Workers: cbl.workers}
		r.baseline(ctx, cbl, nil, "warm-up")
		r.baseline(ctx, cbl, st.Concurrent, "before")
	}
	for _, w := range r.ws {
		if ctx.Err() != nil {
			break
		}
		units, d := r.limits(w.Scale)
		live := new(Live)
		r.prog.begin(r.label, w.Name, "", live, units, w.Unit)
		p := workload.Params{Prefix: r.prefix + w.Name + "-"}
		var (
			res   Result
			bytes *BenchBytes
			err   error
		)
		if w.Bytes {
			res, bytes, err = runBytes(ctx, r.store, r.url, w, p, units, d, r.cfg.Rate, live)
		} else {
			res, err = Run(ctx, r.store, w, p, units, d, r.cfg.Rate, live)
		}
		br := BenchResult{Workload: w.Name, Result: res, Bytes: bytes}
		if res.Ops == 0 && ctx.Err() != nil {
			r.prog.end("interrupted before the first op")
			continue
		}
		if err != nil {
			br.Error = Scrub(err.Error())
		}
		r.prog.end(summary(res, w.Unit))
		st.Results = append(st.Results, br)
	}
	// Close the store before the second baseline run, so that the memory it
	// holds (all of it, for the memory backend) can be collected first.
	if err := r.store.Close(); err != nil && ctx.Err() == nil {
		st.Error = join(st.Error, Scrub(fmt.Sprintf("close: %v", err)))
	}
	r.store = nil
	if bl != nil && ctx.Err() == nil {
		r.baseline(ctx, bl, st.Baseline, "after")
	}
	if cbl != nil && ctx.Err() == nil {
		r.baseline(ctx, cbl, st.Concurrent, "after")
	}
	means(st.Baseline)
	means(st.Concurrent)
	for i := range st.Results {
		res := &st.Results[i]
		b := st.Baseline
		if c := st.Concurrent; c != nil && c.Workers > 1 && c.Workers == workersOf(r.ws, res.Workload) && c.EventsPerSec > 0 {
			b = c
		}
		if b == nil || res.Ops == 0 || b.EventsPerSec == 0 || !Writes(res.Workload) {
			continue
		}
		res.VsBaseline = &BenchRatios{
			Throughput: res.Rate(unitOf(r.ws, res.Workload)) / b.EventsPerSec,
			P50:        ratio(res.Latency.P50, b.P50),
			P99:        ratio(res.Latency.P99, b.P99),
		}
	}
}

// means sets b's means and spread from its runs.
func means(b *BenchBaseline) {
	if b == nil || len(b.Runs) == 0 {
		return
	}
	lo, hi := math.Inf(1), 0.0
	for _, run := range b.Runs {
		lo, hi = min(lo, run.EventsPerSec), max(hi, run.EventsPerSec)
		b.EventsPerSec += run.EventsPerSec / float64(len(b.Runs))
		b.P50 += run.Latency.P50 / time.Duration(len(b.Runs))
		b.P99 += run.Latency.P99 / time.Duration(len(b.Runs))
	}
	if lo > 0 {
		b.Spread = hi / lo
	}
}

func workersOf(ws []workload.Workload, name string) int {
	for _, w := range ws {
		if w.Name == name {
			return w.Workers
		}
	}
	return 1
}

// baseline measures bl and adds the run to b; with b nil it is a warm-up
// of a tenth of the budget (at most a second) whose figures are dropped:
// the first measurement of a process runs on a cold heap and connection.
func (r *benchRun) baseline(ctx context.Context, bl *baseline, b *BenchBaseline, when string) {
	units, d := r.limits(false)
	if b == nil {
		units, d = max(units/10, 1), time.Second
	}
	live := new(Live)
	r.prog.begin(r.label, "baseline", when, live, units, workload.Events)
	res, err := Measure(ctx, max(bl.workers, 1), bl.newOp, Limits{Ops: units, Duration: d}, live)
	if b == nil {
		r.prog.end(summary(res, workload.Events))
		return
	}
	if err != nil {
		b.Error = join(b.Error, Scrub(fmt.Sprintf("%s: %v", when, err)))
		r.prog.end("failed")
		return
	}
	r.prog.end(summary(res, workload.Events))
	if res.Ops > 0 && res.Stopped != workload.StopInterrupted {
		b.Runs = append(b.Runs, res)
	}
}

func unitOf(ws []workload.Workload, name string) workload.Unit {
	for _, w := range ws {
		if w.Name == name {
			return w.Unit
		}
	}
	return workload.Events
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func summary(res Result, u workload.Unit) string {
	s := fmt.Sprintf("%s %s in %v, %s %s/s, p50 %v, p99 %v", GroupDigits(float64(countOf(res, u))), u,
		fmtDur(res.Elapsed), GroupDigits(res.Rate(u)), u, fmtDur(res.Latency.P50), fmtDur(res.Latency.P99))
	if res.Stopped != workload.StopBudget {
		s += " (" + res.Stopped + ")"
	}
	return s
}

func countOf(res Result, u workload.Unit) int64 {
	if u == workload.Ops {
		return res.Ops
	}
	return res.Events
}

func varveVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += "+dirty"
		}
	}
	return v
}

// writeWorkloads are the workloads whose op writes, and which the store's
// write baseline measures (TestWorkloadKinds lists the ones that read).
var writeWorkloads = []string{"append-single", "append-batch10", "append-batch100", "append-metadata", "append-expected",
	"concurrent-8", "concurrent-32", "storage-single", "storage-batch10", "scale-append", "scale-batch100", "scale-concurrent8", "scale-streams1000"}

// Writes reports whether a workload only writes: only those get a ratio to
// the store's write baseline.
func Writes(name string) bool { return slices.Contains(writeWorkloads, name) }

// Errors returns the errors of the run beyond its rows': of baselines and
// stores.
func (rep *BenchReport) Errors() []string {
	var out []string
	for _, st := range rep.Stores {
		if st.Baseline != nil && st.Baseline.Error != "" {
			out = append(out, st.Name+" baseline: "+st.Baseline.Error)
		}
		if st.Error != "" {
			out = append(out, st.Name+": "+st.Error)
		}
	}
	return out
}

// BenchDetail is what a bench row holds beyond the shared fields.
type BenchDetail struct {
	Workers     int          `json:"workers"`
	Ops         int64        `json:"ops"`
	Events      int64        `json:"events"`
	VsBaseline  *BenchRatios `json:"vs_baseline"`
	AllocsPerOp float64      `json:"allocs_per_op"`
	BytesPerOp  float64      `json:"bytes_per_op"`
	// Bytes is the store's growth on disk over a storage workload.
	Bytes    *BenchBytes `json:"bytes,omitempty"`
	Timeline []Point     `json:"timeline"`
}

// Rows returns a row per workload and store.
func (rep *BenchReport) Rows() []Row {
	rows := []Row{}
	for _, st := range rep.Stores {
		for _, r := range st.Results {
			wl := rep.workload(r.Workload)
			row := Row{Store: st.Name, Name: r.Workload, Unit: string(wl.Unit), Count: countOf(r.Result, wl.Unit),
				Rate: r.Rate(wl.Unit), Elapsed: r.Elapsed, Latency: r.Latency, Stopped: r.Stopped, Error: r.Error,
				Detail: BenchDetail{Workers: wl.Workers, Ops: r.Ops, Events: r.Events, VsBaseline: r.VsBaseline,
					AllocsPerOp: r.AllocsPerOp, BytesPerOp: r.BytesPerOp, Bytes: r.Bytes, Timeline: r.Timeline}}
			if r.VsBaseline != nil {
				row.Ratio = ratioPtr(r.VsBaseline.Throughput)
			}
			if r.Error != "" {
				row.Errors = 1
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// resultsOf yields the results of workload name with the index of their
// store, in store order.
func (rep *BenchReport) resultsOf(name string) iter.Seq2[int, BenchResult] {
	return func(yield func(int, BenchResult) bool) {
		for si, st := range rep.Stores {
			for _, r := range st.Results {
				if r.Workload == name && !yield(si, r) {
					return
				}
			}
		}
	}
}

func (rep *BenchReport) workload(name string) BenchWorkload {
	for _, w := range rep.Workloads {
		if w.Name == name {
			return w
		}
	}
	return BenchWorkload{Name: name, Unit: workload.Events, Workers: 1}
}

// BenchDetails is what bench's envelope holds beyond its rows.
type BenchDetails struct {
	Workloads []BenchWorkload     `json:"workloads"`
	Baselines []BenchStoreDetails `json:"baselines"`
}

// BenchStoreDetails is a store's baseline in the envelope.
type BenchStoreDetails struct {
	Store    string         `json:"store"`
	Features varve.Features `json:"features"`
	Baseline *BenchBaseline `json:"baseline"`
}

// Details returns the envelope's details of the run.
func (rep *BenchReport) Details() BenchDetails {
	d := BenchDetails{Workloads: rep.Workloads, Baselines: []BenchStoreDetails{}}
	for _, st := range rep.Stores {
		d.Baselines = append(d.Baselines, BenchStoreDetails{Store: st.Name, Features: st.Features, Baseline: st.Baseline})
	}
	return d
}
