package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/aggregate"
)

// DefaultLoadtestBackend is the backend `varve loadtest` uses when neither
// BACKEND nor --store names one: the embedded SQLite store, in a file in a
// temporary directory.
const DefaultLoadtestBackend = "sqlite"

// Local default URLs of the loadtest's backend names.
const (
	LocalNATSURL     = "nats://127.0.0.1:4222"
	LocalPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// LoadtestConfig configures [Loadtest]; the knobs are those of seed 001.
type LoadtestConfig struct {
	// Store is a backend name (mem, sqlite, nats, postgres) or a store URL.
	Store string `json:"store"`
	// Ops is the number of load/modify/save cycles (N).
	Ops int `json:"ops"`
	// Users is the number of distinct aggregates (U).
	Users int `json:"users"`
	// Batch is the number of cycles per progress line (B).
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
}

// DefaultLoadtestConfig returns seed 001's defaults, with snapshots every
// 10 events, room for 10,000 aggregates in the cache, and one worker.
func DefaultLoadtestConfig() LoadtestConfig {
	return LoadtestConfig{
		Store: DefaultLoadtestBackend, Ops: 50_000, Users: 100, Batch: 1000, Workers: 1,
		Snapshots: true, SnapshotEvery: 10, Cache: false, CacheSize: 10_000, Seed: 1,
	}
}

func (c LoadtestConfig) validate() error {
	if c.Ops <= 0 || c.Users <= 0 || c.Batch <= 0 || c.Workers <= 0 || c.SnapshotEvery <= 0 || c.CacheSize <= 0 {
		return fmt.Errorf("lab: loadtest: ops, users, batch, workers, snapshot-every and cache-size must be positive: %w", varve.ErrInvalidArgument)
	}
	return nil
}

// LoadtestResult holds the figures of one run.
type LoadtestResult struct {
	Config  LoadtestConfig `json:"config"`
	Backend string         `json:"backend"`
	URL     string         `json:"url"`
	// Workers actually run: at most Users.
	Workers   int           `json:"workers"`
	Ops       int           `json:"ops"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	OpsPerSec float64       `json:"ops_per_sec"`
	// Latency of one load/modify/save cycle (Execute), retries included,
	// the verifying reload excluded.
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
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
	// backend implements varve.RequestCounter; nil otherwise.
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
}

// LoadtestStoreURL turns a backend name into a local store URL: mem and
// memory into memory:, sqlite into a file in a new temporary directory
// (removed by cleanup), nats and postgres into the local servers. Anything
// else is taken as a store URL.
func LoadtestStoreURL(name string) (url string, cleanup func() error, err error) {
	none := func() error { return nil }
	switch strings.ToLower(name) {
	case "mem", "memory":
		return "memory:", none, nil
	case "sqlite":
		dir, err := os.MkdirTemp("", "varve-loadtest-")
		if err != nil {
			return "", none, fmt.Errorf("lab: loadtest: temporary directory for sqlite: %w", err)
		}
		return "sqlite://" + filepath.ToSlash(filepath.Join(dir, "loadtest.db")), func() error { return os.RemoveAll(dir) }, nil
	case "nats":
		return LocalNATSURL, none, nil
	case "postgres", "postgresql", "pg":
		return LocalPostgresURL, none, nil
	}
	if !strings.Contains(name, ":") {
		return "", none, fmt.Errorf("lab: loadtest: backend %q: want mem, sqlite, nats, postgres or a store URL: %w", name, varve.ErrInvalidArgument)
	}
	return name, none, nil
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

var loadtestEvents = func() *aggregate.Registry {
	r := aggregate.NewRegistry()
	aggregate.Register[UserRegistered](r, "UserRegistered")
	aggregate.Register[EmailChanged](r, "EmailChanged")
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

// Loadtest runs cfg.Ops load/modify/save cycles over cfg.Users aggregates of
// a fresh category, on cfg.Workers goroutines, and measures them. It writes
// the configuration and a line per cfg.Batch cycles to progress, if not nil.
func Loadtest(ctx context.Context, cfg LoadtestConfig, progress io.Writer) (LoadtestResult, error) {
	res := LoadtestResult{Config: cfg}
	if err := cfg.validate(); err != nil {
		return res, err
	}
	if progress == nil {
		progress = io.Discard
	}
	url, cleanup, err := LoadtestStoreURL(cfg.Store)
	if err != nil {
		return res, err
	}
	defer cleanup()
	res.URL = Redact(url)
	b, err := OpenBackend(ctx, url)
	if err != nil {
		return res, err
	}
	cb := &callCounter{Backend: b}
	store, err := varve.New(cb, varve.Config{})
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
	}, rcfg)
	if err != nil {
		return res, fmt.Errorf("lab: loadtest: %w", err)
	}
	res.Workers = min(cfg.Workers, cfg.Users)
	printLoadtestConfig(progress, res)

	rc, counting := b.(varve.RequestCounter)
	var requests0 uint64
	if counting {
		requests0 = rc.Requests()
	}
	calls0 := cb.calls.Load()
	runtime.GC()
	fmt.Fprintln(progress, "=== Starting Load Test ===")

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rep := &reporter{w: progress, batch: cfg.Batch, total: cfg.Ops, last: time.Now()}
	hists := make([]*hdrhistogram.Histogram, res.Workers)
	verified := make([]int, res.Workers)
	mismatches := make([]int, res.Workers)
	cpu0, _ := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range res.Workers {
		ops := cfg.Ops / res.Workers
		if w < cfg.Ops%res.Workers {
			ops++
		}
		hists[w] = hdrhistogram.New(1, int64(time.Minute), 3)
		wg.Go(func() {
			lw := &loadtestWorker{
				repo: repo, cfg: cfg, hist: hists[w], rep: rep,
				rng:   rand.New(rand.NewPCG(cfg.Seed, uint64(w))),
				users: ownedUsers(w, res.Workers, cfg.Users),
			}
			if err := lw.run(ctx, ops); err != nil {
				cancel(err)
			}
			verified[w], mismatches[w] = lw.verified, lw.mismatches
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	if cpu1, ok := processCPU(); ok {
		res.CPUPerOp = (cpu1 - cpu0) / time.Duration(cfg.Ops)
	}
	if err := context.Cause(ctx); err != nil {
		return res, fmt.Errorf("lab: loadtest: %w", err)
	}

	h := hists[0]
	for _, o := range hists[1:] {
		h.Merge(o)
	}
	res.Ops = cfg.Ops
	res.OpsPerSec = float64(cfg.Ops) / res.Elapsed.Seconds()
	res.P50 = time.Duration(h.ValueAtQuantile(50))
	res.P90 = time.Duration(h.ValueAtQuantile(90))
	res.P99 = time.Duration(h.ValueAtQuantile(99))
	res.Max = time.Duration(h.Max())
	for w := range res.Workers {
		res.Verified += verified[w]
		res.Mismatches += mismatches[w]
	}
	res.StoreCalls = cb.calls.Load() - calls0
	res.StoreCallsPerOp = float64(res.StoreCalls) / float64(cfg.Ops)
	if counting {
		n := rc.Requests() - requests0
		per := float64(n) / float64(cfg.Ops)
		res.Requests, res.RequestsPerOp = &n, &per
	}
	res.Repository = repo.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapMiB, res.SysMiB = mib(ms.HeapAlloc), mib(ms.Sys)
	if cfg.Baseline {
		el, err := loadtestBaseline(ctx, store, cfg, res.Workers)
		if err != nil {
			return res, fmt.Errorf("lab: loadtest baseline: %w", err)
		}
		res.BaselineOpsPerSec = float64(cfg.Ops) / el.Seconds()
		res.CycleCost = res.BaselineOpsPerSec / res.OpsPerSec
		fmt.Fprintf(progress, "=== Baseline: %d bare appends in %v ===\n", cfg.Ops, el.Round(time.Millisecond))
	}
	return res, nil
}

// loadtestBaseline appends the events a run's cycles append, without an
// aggregate, and returns the time it took.
func loadtestBaseline(ctx context.Context, store *varve.Store, cfg LoadtestConfig, workers int) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	category := fmt.Sprintf("lt%08x-raw-", rand.Uint32())
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		ops := cfg.Ops / workers
		if w < cfg.Ops%workers {
			ops++
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(w)))
			users := ownedUsers(w, workers, cfg.Users)
			for i := range ops {
				id := users[rng.IntN(len(users))]
				data, err := aggregate.JSON{}.Marshal(EmailChanged{Email: "user-" + id + "-" + strconv.Itoa(i) + "@example.com"})
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
	rng                  *rand.Rand
	users                []string
	verified, mismatches int
}

func (lw *loadtestWorker) run(ctx context.Context, ops int) error {
	for i := range ops {
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
			return err
		}
		_ = lw.hist.RecordValue(int64(time.Since(t)))
		if lw.cfg.LoadAfterSave {
			b, err := lw.repo.Load(ctx, id, aggregate.FromStore())
			if err != nil {
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

// reporter prints a progress line per batch of completed cycles.
type reporter struct {
	w     io.Writer
	batch int
	total int
	n     atomic.Int64
	mu    sync.Mutex
	last  time.Time
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
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(r.w, "%*d/%d | %6d ops | %6d ms | %8.0f ops/s | %.0f/%.0f MiB (heap/sys)\n",
		len(strconv.Itoa(r.total)), n, r.total, r.batch, d.Milliseconds(), float64(r.batch)/d.Seconds(), mib(ms.HeapAlloc), mib(ms.Sys))
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
	fmt.Fprintf(w, "=== Load Test Configuration ===\n"+
		"  Backend:         %s (%s)\n"+
		"  Total ops:       %d\n"+
		"  Unique users:    %d\n"+
		"  Batch size:      %d\n"+
		"  Workers:         %d\n"+
		"  Snapshots:       %s\n"+
		"  Cache:           %s\n"+
		"  Load after save: %v\n",
		r.Backend, r.URL, c.Ops, c.Users, c.Batch, r.Workers, snap, cache, c.LoadAfterSave)
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
	_, err := fmt.Fprintf(w, "=== Results ===\n"+
		"  Total time:      %.3f seconds\n"+
		"  Total ops:       %d\n"+
		"  Avg rate:        %.0f ops/s\n"+
		"  CPU per op:      %v\n"+
		"  Cycle latency:   p50 %v, p90 %v, p99 %v, max %v\n"+
		"  Conflicts:       %d (%d retries)\n"+
		"  Load after save: %s\n"+
		"  Cache:           %s\n"+
		"  Snapshots:       %d loaded, %d saved, %d ignored, %d errors\n"+
		"  Events replayed: %d (%.2f per op)\n"+
		"  Store calls/op:  %.2f (%d calls)\n"+
		"  Requests/op:     %s\n"+
		"  Final memory:    %.0f MiB heap, %.0f MiB sys\n"+
		"%s",
		r.Elapsed.Seconds(), r.Ops, r.OpsPerSec, round(r.CPUPerOp),
		round(r.P50), round(r.P90), round(r.P99), round(r.Max),
		s.Conflicts, s.Retries, verify, hits,
		s.SnapshotsLoaded, s.SnapshotsSaved, s.SnapshotsIgnored, s.SnapshotErrors,
		s.EventsReplayed, float64(s.EventsReplayed)/float64(max(r.Ops, 1)),
		r.StoreCallsPerOp, r.StoreCalls, requests, r.HeapMiB, r.SysMiB, baseline)
	return err
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

// callCounter counts the calls made to a backend. It passes snapshots
// through when the backend has them and hides its other capabilities.
type callCounter struct {
	varve.Backend
	calls atomic.Uint64
}

var errNoSnapshots = errors.New("lab: backend has no snapshot store")

func (c *callCounter) Features() varve.Features {
	f := c.Backend.Features()
	_, f.Snapshots = c.Backend.(varve.SnapshotStore)
	f.Snapshots = f.Snapshots && c.Backend.Features().Snapshots
	f.Checkpoints, f.Watch = false, false
	return f
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

func (c *callCounter) SaveSnapshot(ctx context.Context, s varve.Snapshot) error {
	c.calls.Add(1)
	ss, ok := c.Backend.(varve.SnapshotStore)
	if !ok {
		return errNoSnapshots
	}
	return ss.SaveSnapshot(ctx, s)
}

func (c *callCounter) LoadSnapshot(ctx context.Context, stream string) (varve.Snapshot, bool, error) {
	c.calls.Add(1)
	ss, ok := c.Backend.(varve.SnapshotStore)
	if !ok {
		return varve.Snapshot{}, false, errNoSnapshots
	}
	return ss.LoadSnapshot(ctx, stream)
}
