package lab

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
	"github.com/varve-go/varve/aggregate/gojson"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/schema"
)

// LoadtestConfig configures [Loadtest].
type LoadtestConfig struct {
	// Store is the URL of the store to open, Label its name in reports.
	Store string `json:"-"`
	Label string `json:"-"`
	// Ops is the number of load/modify/save cycles; 0 means no budget: the
	// run goes on until Duration.
	Ops int `json:"ops"`
	// Duration caps the run; 0 means no cap.
	Duration time.Duration `json:"duration_ns"`
	// Rate caps the cycles per second over all workers; 0 means no cap.
	Rate float64 `json:"rate"`
	// Users is the number of distinct aggregates.
	Users int `json:"users"`
	// Batch is the number of cycles per progress line.
	Batch int `json:"batch"`
	// Workers run cycles concurrently; each owns every Workers-th user, so
	// no two workers write the same aggregate.
	Workers int `json:"workers"`
	// Snapshots turns snapshots on, one every SnapshotEvery events.
	Snapshots     bool `json:"snapshots"`
	SnapshotEvery int  `json:"snapshot_every"`
	// Cache turns the aggregate cache on, with room for CacheSize aggregates.
	Cache     bool `json:"cache"`
	CacheSize int  `json:"cache_size"`
	// LoadAfterSave reloads every saved aggregate from the store (not the
	// cache) and counts states that differ from the saved one.
	LoadAfterSave bool `json:"load_after_save"`
	// Seed makes the choice of users reproducible.
	Seed uint64 `json:"seed"`
	// Baseline also runs, after the cycles, as many bare appends of the
	// same events (encoded, appended with ExpectedVersion Any, nothing
	// loaded), on the same workers and store: the floor of a cycle, measured
	// in the same run.
	Baseline bool `json:"baseline"`
	// Codec encodes events and snapshots: "json" (encoding/json, the
	// default) or "gojson" (github.com/goccy/go-json, the same JSON).
	Codec string `json:"codec"`
}

// DefaultLoadtestConfig returns the defaults: 50,000 cycles over 100
// users, snapshots every 10 events, room for 10,000 aggregates in the cache
// (off), one worker.
func DefaultLoadtestConfig() LoadtestConfig {
	return LoadtestConfig{
		Store: "memory:", Ops: 50_000, Users: 100, Batch: 1000, Workers: 1,
		Snapshots: true, SnapshotEvery: 10, Cache: false, CacheSize: 10_000, Seed: 1, Codec: "json",
	}
}

func (c LoadtestConfig) validate() error {
	if c.Ops < 0 || c.Users <= 0 || c.Batch <= 0 || c.Workers <= 0 || c.SnapshotEvery <= 0 || c.CacheSize <= 0 || c.Duration < 0 || c.Rate < 0 {
		return fmt.Errorf("lab: loadtest: users, batch, workers, snapshot-every and cache-size must be positive, ops, duration and rate not negative: %w", varve.ErrInvalidArgument)
	}
	if _, ok := loadtestCodecs[c.Codec]; !ok {
		return fmt.Errorf("lab: loadtest: codec %q: want json or gojson: %w", c.Codec, varve.ErrInvalidArgument)
	}
	if c.Ops == 0 && c.Duration == 0 {
		return fmt.Errorf("lab: loadtest: no op budget and no duration: the run would not end: %w", varve.ErrInvalidArgument)
	}
	return nil
}

// LoadtestResult holds the figures of one run: the shared fields of its
// row and, embedded, the row's detail.
type LoadtestResult struct {
	Config LoadtestConfig `json:"config"`
	Store  string         `json:"store"`
	// Ops is the number of cycles that completed.
	Ops       int           `json:"ops"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	OpsPerSec float64       `json:"ops_per_sec"`
	// Latency of one load/modify/save cycle (Execute), retries included,
	// the verifying reload and any wait for the rate cap excluded.
	Latency Latency `json:"latency"`
	// Stopped says why the run ended: budget, duration, interrupted or
	// error; Error is the error that ended it.
	Stopped string `json:"stopped"`
	Error   string `json:"error,omitempty"`
	LoadtestDetail
}

// LoadtestDetail is what a loadtest row holds beyond the shared fields.
type LoadtestDetail struct {
	Backend string `json:"backend"`
	// Workers actually run: at most Users.
	Workers int `json:"workers"`
	// CPUPerOp is the CPU time (user and system, all goroutines, the GC
	// included) the process used per cycle: steadier than ops/s on a shared
	// machine. 0 where the platform does not report it.
	CPUPerOp time.Duration `json:"cpu_per_op_ns"`
	// Verified reloads and the ones whose state or version differed.
	Verified   int `json:"verified"`
	Mismatches int `json:"mismatches"`
	// StoreCalls counts the backend methods the run called (appends, stream
	// reads, snapshot loads and saves); StoreCallsPerOp divides by Ops.
	StoreCalls      uint64  `json:"store_calls"`
	StoreCallsPerOp float64 `json:"store_calls_per_op"`
	// Requests counts the requests the backend sent to its server, when the
	// backend counts them; nil otherwise.
	Requests      *uint64  `json:"requests,omitempty"`
	RequestsPerOp *float64 `json:"requests_per_op,omitempty"`
	// Repository counters: cache, snapshots, replayed events, conflicts.
	Repository aggregate.Stats `json:"repository"`
	// Go heap in use and memory obtained from the OS at the end, in MiB.
	HeapMiB float64 `json:"heap_mib"`
	SysMiB  float64 `json:"sys_mib"`
	// BaselineOpsPerSec is the rate of the bare appends when Config.Baseline
	// is set; CycleCost is OpsPerSec's inverse relative to it (2 means a
	// cycle takes twice as long as a bare append).
	BaselineOpsPerSec float64 `json:"baseline_ops_per_sec,omitempty"`
	CycleCost         float64 `json:"cycle_cost,omitempty"`
	// Timeline is the rate of every batch of cycles, as the progress lines
	// show it.
	Timeline []BatchPoint `json:"timeline"`
}

// BatchPoint is the end of a batch of cycles.
type BatchPoint struct {
	At        time.Duration `json:"at_ns"`
	Ops       int64         `json:"ops"`
	OpsPerSec float64       `json:"ops_per_sec"`
}

// The loadtest's aggregate: seed 001's user whose email changes.
type loadtestUser struct {
	Email   string `json:"email"`
	Changes int    `json:"changes"`
}

type UserRegistered struct {
	Email string `json:"email"`
}

type EmailChanged struct {
	Email string `json:"email"`
}

var loadtestCodecs = map[string]schema.Codec{"json": schema.JSON{}, "gojson": gojson.Codec{}}

var loadtestEvents = func() *schema.Registry {
	r := schema.NewRegistry()
	schema.Register[UserRegistered](r, "UserRegistered")
	schema.Register[EmailChanged](r, "EmailChanged")
	return r
}()

func applyLoadtestUser(u loadtestUser, e any) loadtestUser {
	switch e := e.(type) {
	case UserRegistered:
		u.Email = e.Email
	case EmailChanged:
		u.Email = e.Email
		u.Changes++
	}
	return u
}

// Loadtest runs cfg.Ops load/modify/save cycles (or cycles until
// cfg.Duration) over cfg.Users aggregates of a fresh category, on
// cfg.Workers goroutines, and measures them. It writes the configuration
// and a line per cfg.Batch cycles to progress, if not nil. When ctx ends or
// a cycle fails, the result holds the cycles that completed before, with
// the error.
func Loadtest(ctx context.Context, cfg LoadtestConfig, progress io.Writer) (LoadtestResult, error) {
	res := LoadtestResult{Config: cfg, Store: cfg.Label}
	if res.Store == "" {
		res.Store = Redact(cfg.Store)
	}
	if err := cfg.validate(); err != nil {
		return res, err
	}
	if progress == nil {
		progress = io.Discard
	}
	b, err := OpenBackend(ctx, cfg.Store)
	if err != nil {
		return res, err
	}
	cb := &callCounter{Backend: b}
	var counted varve.Backend = cb
	if ss, ok := b.(varve.SnapshotStore); ok {
		counted = &snapshotCallCounter{cb, ss}
		if cs, ok := b.(varve.CommitSnapshotStore); ok {
			counted = &commitSnapshotCallCounter{&snapshotCallCounter{cb, ss}, cs}
		}
	}
	store, err := varve.New(counted, varve.Config{})
	if err != nil {
		b.Close()
		return res, err
	}
	defer store.Close()
	res.Backend = b.Features().Name

	rcfg := aggregate.Config{}
	if cfg.Snapshots {
		rcfg.SnapshotEvery = cfg.SnapshotEvery
	}
	if cfg.Cache {
		rcfg.CacheSize = cfg.CacheSize
	}
	repo, err := aggregate.New(store, aggregate.Definition[loadtestUser]{
		Category: fmt.Sprintf("lt%08x-user", rand.Uint32()),
		Apply:    applyLoadtestUser,
		Events:   loadtestEvents,
		Codec:    loadtestCodecs[cfg.Codec],
	}, rcfg)
	if err != nil {
		return res, fmt.Errorf("lab: loadtest: %w", err)
	}
	res.Workers = min(cfg.Workers, cfg.Users)
	printLoadtestConfig(progress, res)

	rc, counting := b.(requestCounter)
	var requests0 uint64
	if counting {
		requests0 = rc.Requests()
	}
	calls0 := cb.calls.Load()
	runtime.GC()
	fmt.Fprintln(progress, "=== Starting Load Test ===")

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var halt atomic.Bool // the time cap passed
	if cfg.Duration > 0 {
		t := time.AfterFunc(cfg.Duration, func() { halt.Store(true) })
		defer t.Stop()
	}
	pace := newPaced(runCtx, cfg.Rate, cfg.Duration)
	defer pace.stop()
	rep := &reporter{w: progress, batch: cfg.Batch, total: cfg.Ops, last: time.Now(), start: time.Now()}
	workers := make([]*loadtestWorker, res.Workers)
	var budget atomic.Int64
	budget.Store(int64(cfg.Ops))
	take := func() bool {
		if halt.Load() || runCtx.Err() != nil {
			return false
		}
		return cfg.Ops == 0 || budget.Add(-1) >= 0
	}
	cpu0, _ := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		lw := &loadtestWorker{repo: repo, cfg: cfg, hist: NewHistogram(), rep: rep, pace: pace,
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(w))), users: ownedUsers(w, res.Workers, cfg.Users)}
		workers[w] = lw
		wg.Go(func() {
			if err := lw.run(runCtx, take); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)

	h := NewHistogram()
	for _, lw := range workers {
		h.Merge(lw.hist)
		res.Verified += lw.verified
		res.Mismatches += lw.mismatches
	}
	res.Latency = LatencyOf(h)
	res.Ops = int(h.TotalCount())
	res.Timeline = rep.points
	if res.Elapsed > 0 {
		res.OpsPerSec = float64(res.Ops) / res.Elapsed.Seconds()
	}
	if cpu1, ok := processCPU(); ok && res.Ops > 0 {
		res.CPUPerOp = (cpu1 - cpu0) / time.Duration(res.Ops)
	}
	res.StoreCalls = cb.calls.Load() - calls0
	if res.Ops > 0 {
		res.StoreCallsPerOp = float64(res.StoreCalls) / float64(res.Ops)
	}
	if counting {
		n := rc.Requests() - requests0
		per := float64(n) / float64(max(res.Ops, 1))
		res.Requests, res.RequestsPerOp = &n, &per
	}
	res.Repository = repo.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapMiB, res.SysMiB = mib(ms.HeapAlloc), mib(ms.Sys)
	res.Stopped = "budget"
	switch cause := context.Cause(runCtx); {
	case ctx.Err() != nil:
		res.Stopped = "interrupted"
		return res, fmt.Errorf("lab: loadtest interrupted: %w", context.Cause(ctx))
	case cause != nil:
		res.Stopped = "error"
		res.Error = Scrub(cause.Error())
		return res, fmt.Errorf("lab: loadtest: %w", scrubErr(cause))
	case cfg.Ops == 0 || res.Ops < cfg.Ops:
		res.Stopped = "duration"
	}
	if cfg.Baseline && res.Ops > 0 {
		el, err := loadtestBaseline(ctx, store, cfg, res.Ops, res.Workers)
		if err != nil {
			res.Error = Scrub(err.Error())
			return res, fmt.Errorf("lab: loadtest baseline: %w", scrubErr(err))
		}
		res.BaselineOpsPerSec = float64(res.Ops) / el.Seconds()
		res.CycleCost = res.BaselineOpsPerSec / res.OpsPerSec
		fmt.Fprintf(progress, "=== Baseline: %d bare appends in %v ===\n", res.Ops, el.Round(time.Millisecond))
	}
	return res, nil
}

// loadtestBaseline appends the events a run's cycles append, without an
// aggregate, and returns the time it took.
func loadtestBaseline(ctx context.Context, store *varve.Store, cfg LoadtestConfig, total, workers int) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	category := fmt.Sprintf("lt%08x-raw-", rand.Uint32())
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		ops := total / workers
		if w < total%workers {
			ops++
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(w)))
			users := ownedUsers(w, workers, cfg.Users)
			for i := range ops {
				id := users[rng.IntN(len(users))]
				data, err := schema.JSON{}.Marshal(EmailChanged{Email: "user-" + id + "-" + strconv.Itoa(i) + "@example.com"})
				if err == nil {
					_, err = store.Append(ctx, category+id, varve.Any, varve.Event{Type: "EmailChanged", Data: data})
				}
				if err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), context.Cause(ctx)
}

// ownedUsers returns the users of worker w of n: w, w+n, w+2n, ...
func ownedUsers(w, n, users int) []string {
	var out []string
	for u := w; u < users; u += n {
		out = append(out, strconv.Itoa(u))
	}
	return out
}

type loadtestWorker struct {
	repo                 *aggregate.Repository[loadtestUser]
	cfg                  LoadtestConfig
	hist                 *hdrhistogram.Histogram
	rep                  *reporter
	pace                 *paced
	rng                  *rand.Rand
	users                []string
	verified, mismatches int
}

// run runs cycles while take grants them. A cycle cut short by the end of
// ctx is not an error.
func (lw *loadtestWorker) run(ctx context.Context, take func() bool) error {
	for i := 0; take(); i++ {
		if ok, _ := lw.pace.wait(); !ok {
			return nil
		}
		id := lw.users[lw.rng.IntN(len(lw.users))]
		email := "user-" + id + "-" + strconv.Itoa(i) + "@example.com"
		t := time.Now()
		a, err := lw.repo.Execute(ctx, id, func(a *aggregate.Aggregate[loadtestUser]) error {
			if a.Version() == 0 {
				return a.Raise(UserRegistered{Email: email})
			}
			return a.Raise(EmailChanged{Email: email})
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		_ = lw.hist.RecordValue(int64(time.Since(t)))
		if lw.cfg.LoadAfterSave {
			b, err := lw.repo.Load(ctx, id, aggregate.FromStore())
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("reload after save: %w", err)
			}
			lw.verified++
			if b.State() != a.State() || b.Version() != a.Version() || b.State().Email != email {
				lw.mismatches++
			}
		}
		lw.rep.done()
	}
	return nil
}

// reporter prints a progress line per batch of completed cycles and keeps
// it as a point of the timeline.
type reporter struct {
	w      io.Writer
	batch  int
	total  int // 0: no budget
	n      atomic.Int64
	mu     sync.Mutex
	start  time.Time
	last   time.Time
	points []BatchPoint
}

func (r *reporter) done() {
	n := r.n.Add(1)
	if n%int64(r.batch) != 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	d := now.Sub(r.last)
	r.last = now
	rate := float64(r.batch) / d.Seconds()
	r.points = append(r.points, BatchPoint{At: now.Sub(r.start), Ops: n, OpsPerSec: rate})
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	total := "-"
	if r.total > 0 {
		total = strconv.Itoa(r.total)
	}
	fmt.Fprintf(r.w, "%*d/%s | %6d ops | %6d ms | %8.0f ops/s | %.0f/%.0f MiB (heap/sys)\n",
		len(total), n, total, r.batch, d.Milliseconds(), rate, mib(ms.HeapAlloc), mib(ms.Sys))
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func printLoadtestConfig(w io.Writer, r LoadtestResult) {
	c := r.Config
	snap := "false"
	if c.Snapshots {
		snap = fmt.Sprintf("true (every %d events)", c.SnapshotEvery)
	}
	cache := "false"
	if c.Cache {
		cache = fmt.Sprintf("true (%d aggregates)", c.CacheSize)
	}
	ops := GroupDigits(float64(c.Ops))
	if c.Ops == 0 {
		ops = "no budget"
	}
	limits := "none"
	switch {
	case c.Duration > 0 && c.Rate > 0:
		limits = fmt.Sprintf("%v, %s cycles/s", c.Duration, GroupDigits(c.Rate))
	case c.Duration > 0:
		limits = c.Duration.String()
	case c.Rate > 0:
		limits = GroupDigits(c.Rate) + " cycles/s"
	}
	fmt.Fprintf(w, "=== Load Test Configuration ===\n"+
		"  Store:           %s (%s)\n"+
		"  Total ops:       %s\n"+
		"  Limits:          %s\n"+
		"  Unique users:    %d\n"+
		"  Batch size:      %d\n"+
		"  Workers:         %d\n"+
		"  Snapshots:       %s\n"+
		"  Cache:           %s\n"+
		"  Codec:           %s\n"+
		"  Load after save: %v\n",
		r.Store, r.Backend, ops, limits, c.Users, c.Batch, r.Workers, snap, cache, c.Codec, c.LoadAfterSave)
}

// PrintLoadtestResult writes the results of a run as text.
func PrintLoadtestResult(w io.Writer, r LoadtestResult) error {
	s := r.Repository
	requests := "n/a (backend " + r.Backend + " does not count server requests)"
	if r.Requests != nil {
		requests = fmt.Sprintf("%.2f (%d requests)", *r.RequestsPerOp, *r.Requests)
	}
	verify := "off"
	if r.Config.LoadAfterSave {
		verify = fmt.Sprintf("%d reloads, %d mismatches", r.Verified, r.Mismatches)
	}
	baseline := ""
	if r.BaselineOpsPerSec > 0 {
		baseline = fmt.Sprintf("  Baseline:        %.0f bare appends/s; a cycle costs %.2f bare appends\n", r.BaselineOpsPerSec, r.CycleCost)
	}
	hits := "off"
	if r.Config.Cache {
		hits = fmt.Sprintf("%d hits, %d misses", s.CacheHits, s.CacheMisses)
	}
	stopped := r.Stopped
	if r.Error != "" {
		stopped += ": " + termtext.Escape(r.Error)
	}
	_, err := fmt.Fprintf(w, "=== Results: %s ===\n"+
		"  Total time:      %.3f seconds (stopped: %s)\n"+
		"  Total ops:       %d\n"+
		"  Avg rate:        %.0f ops/s\n"+
		"  CPU per op:      %v\n"+
		"  Cycle latency:   %s\n"+
		"  Conflicts:       %d (%d retries)\n"+
		"  Load after save: %s\n"+
		"  Cache:           %s\n"+
		"  Snapshots:       %d loaded, %d saved, %d ignored, %d errors\n"+
		"  Events replayed: %d (%.2f per op)\n"+
		"  Store calls/op:  %.2f (%d calls)\n"+
		"  Requests/op:     %s\n"+
		"  Final memory:    %.0f MiB heap, %.0f MiB sys\n"+
		"%s",
		r.Store, r.Elapsed.Seconds(), stopped, r.Ops, r.OpsPerSec, round(r.CPUPerOp), r.Latency,
		s.Conflicts, s.Retries, verify, hits,
		s.SnapshotsLoaded, s.SnapshotsSaved, s.SnapshotsIgnored, s.SnapshotErrors,
		s.EventsReplayed, float64(s.EventsReplayed)/float64(max(r.Ops, 1)),
		r.StoreCallsPerOp, r.StoreCalls, requests, r.HeapMiB, r.SysMiB, baseline)
	return err
}

// Row returns the run as a row: its errors are a failed cycle and the
// reloads that differed from what was saved; its ratio is the cycle rate
// over the bare appends' when the baseline ran.
func (r LoadtestResult) Row() Row {
	row := Row{Store: r.Store, Name: "load/modify/save", Unit: "cycles", Count: int64(r.Ops), Rate: r.OpsPerSec,
		Elapsed: r.Elapsed, Latency: r.Latency, Errors: int64(r.Mismatches), Stopped: r.Stopped, Error: r.Error, Detail: r.LoadtestDetail}
	if r.Error != "" {
		row.Errors++
	}
	if r.BaselineOpsPerSec > 0 {
		row.Ratio = ratioPtr(r.OpsPerSec / r.BaselineOpsPerSec)
	}
	return row
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(100 * time.Nanosecond)
	}
	return d
}

// requestCounter is a backend that counts the requests it sends to its
// server (PostgreSQL, NATS).
type requestCounter interface{ Requests() uint64 }

// callCounter counts the calls made to a backend and hides its optional
// capabilities; snapshotCallCounter passes snapshots through, and
// commitSnapshotCallCounter snapshots kept in commits too.
type callCounter struct {
	varve.Backend
	calls atomic.Uint64
}

func (c *callCounter) Append(ctx context.Context, req varve.AppendRequest) (varve.AppendResult, error) {
	c.calls.Add(1)
	return c.Backend.Append(ctx, req)
}

func (c *callCounter) ReadStream(ctx context.Context, q varve.StreamQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	c.calls.Add(1)
	return c.Backend.ReadStream(ctx, q, buf)
}

func (c *callCounter) ReadAll(ctx context.Context, q varve.AllQuery, buf []varve.RecordedEvent) ([]varve.RecordedEvent, error) {
	c.calls.Add(1)
	return c.Backend.ReadAll(ctx, q, buf)
}

func (c *callCounter) StreamInfo(ctx context.Context, stream string) (varve.StreamInfo, error) {
	c.calls.Add(1)
	return c.Backend.StreamInfo(ctx, stream)
}

type snapshotCallCounter struct {
	*callCounter
	ss varve.SnapshotStore
}

func (c *snapshotCallCounter) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	c.calls.Add(1)
	return c.ss.SaveSnapshot(ctx, s)
}

func (c *snapshotCallCounter) LoadSnapshot(ctx context.Context, stream string) (varve.Snapshot, bool, error) {
	c.calls.Add(1)
	return c.ss.LoadSnapshot(ctx, stream)
}

type commitSnapshotCallCounter struct {
	*snapshotCallCounter
	cs varve.CommitSnapshotStore
}

func (c *commitSnapshotCallCounter) AppendWithSnapshot(ctx context.Context, req varve.AppendRequest, s varve.Snapshot) (varve.AppendResult, error) {
	c.calls.Add(1)
	return c.cs.AppendWithSnapshot(ctx, req, s)
}

func (c *commitSnapshotCallCounter) ReadFromSnapshot(ctx context.Context, stream string, limit int, buf []varve.RecordedEvent) (varve.Snapshot, bool, []varve.RecordedEvent, error) {
	c.calls.Add(1)
	return c.cs.ReadFromSnapshot(ctx, stream, limit, buf)
}
