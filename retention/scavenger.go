package retention

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/backoff"
)

// Defaults of a [Config].
const (
	DefaultInterval     = 10 * time.Minute
	DefaultLease        = "varve.retention"
	DefaultLeaseTTL     = 30 * time.Second
	DefaultMaxRemove    = 1_000_000
	DefaultMaxReadBytes = 256 << 20
	// TruncateStep bounds the events one truncation removes: a stream
	// with more to go is truncated in steps, so that no single write (a
	// SQLite transaction, a PostgreSQL statement) holds the writers back
	// for long.
	TruncateStep = 10_000
	// scanPage and scanPageBytes bound a page of an age scan.
	scanPage      = 256
	scanPageBytes = 1 << 20
	// listPage is the page of a category's stream listing.
	listPage = 500
)

// SpaceReclaimer is a backend that gives the space of removed events back
// to the file system only when asked: SQLite's incremental vacuum
// (sqlite.Backend.ReclaimSpace). The scavenger finds it on the store's
// backend with [varve.As] and calls it after a pass that removed events.
type SpaceReclaimer interface {
	// ReclaimSpace gives free space back and returns how many bytes.
	ReclaimSpace(ctx context.Context) (int64, error)
}

// Config configures a [Scavenger]; Store is required, the zero values of
// the rest are the defaults.
type Config struct {
	Store *varve.Store
	// Interval is the time between the passes of Run; default 10 minutes.
	Interval time.Duration
	// Lease names the lease a pass holds where the store keeps leases, so
	// that one process scavenges at a time; default DefaultLease. Holder
	// names this process (default host-pid-random) and LeaseTTL is how
	// long the lease lasts without a renewal (default 30s; a pass renews
	// it every third of that).
	Lease    string
	Holder   string
	LeaseTTL time.Duration
	// Now is the clock that ages events; default time.Now.
	Now func() time.Time
	// MaxRemove bounds the events one pass removes; default 1,000,000.
	MaxRemove int64
	// MaxReadBytes bounds the event data and metadata one pass reads to
	// find age cuts; default 256 MiB.
	MaxReadBytes int64
	// DryRun makes passes that compute and report what they would remove,
	// and remove, reclaim and record nothing; they hold no lease.
	DryRun bool
	// Hooks are called as a pass goes, for tests and metrics.
	Hooks Hooks
}

// Hooks are called on the goroutine of the pass; they must not block for
// long, since the pass waits for them.
type Hooks struct {
	// Began is called when a pass begins its work, holding the lease
	// where the store keeps leases (until its AfterPass returns).
	Began func()
	// BeforeTruncate is called before each truncation of a stream.
	BeforeTruncate func(stream string, before varve.Version)
	// AfterPass is called after each pass with its report and error.
	AfterPass func(Report, error)
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Store == nil:
		return c, fmt.Errorf("%w: retention: Config.Store is nil", varve.ErrInvalidArgument)
	case c.Interval < 0 || c.LeaseTTL < 0 || c.MaxRemove < 0 || c.MaxReadBytes < 0:
		return c, fmt.Errorf("%w: retention: negative Interval, LeaseTTL, MaxRemove or MaxReadBytes", varve.ErrInvalidArgument)
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Lease == "" {
		c.Lease = DefaultLease
	}
	if c.Holder == "" {
		c.Holder = defaultHolder()
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxRemove == 0 {
		c.MaxRemove = DefaultMaxRemove
	}
	if c.MaxReadBytes == 0 {
		c.MaxReadBytes = DefaultMaxReadBytes
	}
	if err := varve.CheckName(c.Lease); err != nil {
		return c, fmt.Errorf("retention: Config.Lease: %w", err)
	}
	if err := varve.CheckName(c.Holder); err != nil {
		return c, fmt.Errorf("retention: Config.Holder: %w", err)
	}
	if c.LeaseTTL < varve.MinLeaseTTL || c.LeaseTTL > varve.MaxLeaseTTL {
		return c, fmt.Errorf("%w: retention: Config.LeaseTTL %s: want %s..%s", varve.ErrInvalidArgument, c.LeaseTTL, varve.MinLeaseTTL, varve.MaxLeaseTTL)
	}
	return c, nil
}

func defaultHolder() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "host"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// Scavenger applies the retention policies of a store in passes.
type Scavenger struct {
	cfg Config
	mu  sync.Mutex // one pass at a time
}

// New returns a Scavenger; it starts nothing.
func New(cfg Config) (*Scavenger, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Scavenger{cfg: cfg}, nil
}

// Run makes a pass at once and then one every Config.Interval until ctx
// ends, when it returns nil. A pass that fails (the lease held by another
// process, a store that does not answer) is tried again after a back-off of
// up to the interval; its error goes to Hooks.AfterPass.
func (s *Scavenger) Run(ctx context.Context) error {
	delay := backoff.Exponential{Initial: time.Second, Max: s.cfg.Interval, Jitter: 0.2}
	failures := 0
	for {
		_, err := s.ScavengeOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := s.cfg.Interval
		if err != nil && !errors.Is(err, varve.ErrLeaseHeld) {
			failures++
			wait = min(wait, delay.Delay(failures))
		} else {
			failures = 0
		}
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// ScavengeOnce makes one pass and returns its report, which it also
// records in [RunsStream]. Errors on single streams are counted in the
// report; the error is the pass's own: the policies could not be read, the
// lease is held elsewhere ([varve.ErrLeaseHeld]) or was lost, the context
// ended, the report could not be recorded.
func (s *Scavenger) ScavengeOnce(ctx context.Context) (Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &pass{s: s, store: s.cfg.Store, r: Report{Started: s.cfg.Now().UTC(), Holder: s.cfg.Holder}}
	err := p.run(ctx)
	if err != nil {
		err = fmt.Errorf("retention: pass of %s: %w", s.cfg.Holder, err)
	}
	if s.cfg.Hooks.AfterPass != nil {
		s.cfg.Hooks.AfterPass(p.r, err)
	}
	p.release()
	return p.r, err
}

func (p *pass) run(ctx context.Context) error {
	s, store := p.s, p.store
	if err := p.acquire(ctx); err != nil {
		return err
	}
	if s.cfg.Hooks.Began != nil {
		s.cfg.Hooks.Began()
	}
	rules, _, err := load(ctx, store)
	if err != nil {
		return fmt.Errorf("read the policies: %w", err)
	}
	p.r.Rules = len(rules)
	own := map[string]bool{}
	for _, rule := range rules {
		if rule.Target.Stream != "" {
			own[rule.Target.Stream] = true
		}
	}
	for _, rule := range rules {
		if p.stop != nil {
			break
		}
		if rule.Target.Stream != "" {
			p.stream(ctx, rule.Target.Stream, rule.Policy)
		} else {
			p.category(ctx, rule.Target.Category, rule.Policy, own)
		}
	}
	if p.stop == nil && !s.cfg.DryRun {
		p.trimPolicies(ctx)
		if p.r.Removed > 0 {
			p.reclaim(ctx)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	p.r.Finished = s.cfg.Now().UTC()
	if s.cfg.DryRun {
		return p.stop
	}
	if err := p.record(ctx); err != nil {
		return errors.Join(p.stop, fmt.Errorf("record the report: %w", err))
	}
	return p.stop
}

// pass is the state of one pass.
type pass struct {
	s     *Scavenger
	store *varve.Store
	r     Report
	// stop, once set, ends the pass: the lease was lost or the context
	// ended.
	stop error
	// The lease held, and when it was last renewed; zero without leases.
	lease   varve.Lease
	renewed time.Time
}

func (p *pass) acquire(ctx context.Context) error {
	if !p.store.Capabilities().Leases || p.s.cfg.DryRun {
		return nil
	}
	l, err := p.store.Leases().Acquire(ctx, p.s.cfg.Lease, p.s.cfg.Holder, p.s.cfg.LeaseTTL)
	if err != nil {
		if ctx.Err() != nil {
			p.abandon()
		}
		return err
	}
	p.lease, p.renewed = l, time.Now()
	return nil
}

// abandon gives back the lease that an acquisition ended by its context
// may have taken all the same, so that it does not keep the other
// scavengers out for its TTL: it renews it, which hands out its token when
// this holder has it, and releases it.
func (p *pass) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l, err := p.store.Leases().Acquire(ctx, p.s.cfg.Lease, p.s.cfg.Holder, p.s.cfg.LeaseTTL); err == nil {
		_ = p.store.Leases().Release(ctx, l)
	}
}

// renew renews the lease once a third of its TTL has passed since the last
// renewal; a lease lost ends the pass.
func (p *pass) renew(ctx context.Context) {
	if p.lease.Name == "" || time.Since(p.renewed) < p.s.cfg.LeaseTTL/3 {
		return
	}
	l, err := p.store.Leases().Acquire(ctx, p.lease.Name, p.lease.Holder, p.s.cfg.LeaseTTL)
	if err != nil {
		p.r.Incomplete = true
		p.stop = fmt.Errorf("renew the lease %q: %w", p.lease.Name, err)
		return
	}
	p.lease, p.renewed = l, time.Now()
}

func (p *pass) release() {
	if p.lease.Name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.store.Leases().Release(ctx, p.lease)
}

// check ends the pass when ctx has ended or the lease is lost; it reports
// whether the pass goes on.
func (p *pass) check(ctx context.Context) bool {
	if p.stop == nil && ctx.Err() != nil {
		p.r.Incomplete = true
		p.stop = ctx.Err()
	}
	if p.stop == nil {
		p.renew(ctx)
	}
	return p.stop == nil
}

// budget reports whether the pass may go on removing and reading; a spent
// budget marks the report incomplete.
func (p *pass) budget() bool {
	if p.r.Removed >= p.s.cfg.MaxRemove || p.r.ReadBytes >= p.s.cfg.MaxReadBytes {
		p.r.Incomplete = true
		return false
	}
	return true
}

// stream applies pol to the stream of a stream target.
func (p *pass) stream(ctx context.Context, id string, pol Policy) {
	if !p.check(ctx) || !p.budget() {
		return
	}
	info, err := p.store.StreamInfo(ctx, id)
	if gone(err) {
		return
	}
	if err != nil {
		p.fail(ctx, err)
		return
	}
	p.apply(ctx, info, pol)
}

// category applies pol to every stream of category cat but those with a
// policy of their own: the stream named cat itself, then those whose ids
// begin with cat and the separator, page by page.
func (p *pass) category(ctx context.Context, cat string, pol Policy, own map[string]bool) {
	if !p.store.Capabilities().ListStreams {
		p.r.problem(fmt.Errorf("category %q: a category policy needs a store that lists its streams: %w", cat, varve.ErrNotSupported))
		return
	}
	if !own[cat] {
		p.stream(ctx, cat, pol)
	}
	q := varve.ListQuery{Prefix: cat + p.store.Config().CategorySeparator, Limit: listPage}
	for p.check(ctx) && p.budget() {
		page, err := p.store.Streams().List(ctx, q, false)
		if err != nil {
			p.fail(ctx, fmt.Errorf("category %q: %w", cat, err))
			return
		}
		for _, info := range page.Streams {
			if !p.check(ctx) || !p.budget() {
				return
			}
			if !own[info.Stream] {
				p.apply(ctx, info, pol)
			}
		}
		if page.Next == "" {
			return
		}
		q.After = page.Next
	}
}

// apply truncates the stream of info as pol says.
func (p *pass) apply(ctx context.Context, info varve.StreamInfo, pol Policy) {
	if info.Deleted || info.Tombstoned || info.Version == 0 || pol.IsZero() {
		return
	}
	p.r.Streams++
	before, first, err := p.cut(ctx, info, pol)
	if gone(err) {
		return
	}
	if err != nil {
		p.fail(ctx, err)
		return
	}
	if before <= first {
		return
	}
	if left := p.s.cfg.MaxRemove - p.r.Removed; int64(before-first) > left {
		before = first + varve.Version(left)
		p.r.Incomplete = true
	}
	removed, err := p.truncate(ctx, info, first, before)
	if removed > 0 {
		p.r.Truncated++
		p.r.Removed += removed
		if len(p.r.Truncations) < MaxReportTruncations {
			p.r.Truncations = append(p.r.Truncations, Truncation{Stream: info.Stream, Before: first + varve.Version(removed), Removed: removed})
		}
	}
	if err != nil && !gone(err) {
		p.fail(ctx, err)
	}
}

// cut returns the version below which pol removes the events of the
// stream of info, and the stream's first version: the events below before
// go, and before <= first means none does.
func (p *pass) cut(ctx context.Context, info varve.StreamInfo, pol Policy) (before, first varve.Version, err error) {
	id, v := info.Stream, info.Version
	for e, err := range p.store.ReadStream(ctx, id, varve.Limit(1), varve.Sealed()) {
		if err != nil {
			return 0, 0, err
		}
		first = e.Version
	}
	if first == 0 {
		return 0, 0, nil // emptied by an earlier truncation
	}
	limit := v // the last event stays
	if pol.AllowEmpty {
		limit = v + 1
	}
	before = first
	if pol.MaxCount > 0 && v > uint64(pol.MaxCount) {
		before = max(before, v-uint64(pol.MaxCount)+1)
	}
	before = max(before, pol.TruncateBefore)
	before = min(before, limit)
	if pol.MaxAge > 0 && before < limit {
		at, err := p.ageCut(ctx, id, before, limit, p.s.cfg.Now().Add(-pol.MaxAge))
		if err != nil {
			return 0, 0, err
		}
		before = max(before, at)
	}
	return before, first, nil
}

// ageCut reads the stream forward from version from and returns the
// version of its first event recorded at or after cutoff, at most limit.
// When the read budget runs out it returns the version after the last
// event it read, all of them older.
func (p *pass) ageCut(ctx context.Context, id string, from, limit varve.Version, cutoff time.Time) (varve.Version, error) {
	for e, err := range p.store.ReadStream(ctx, id, varve.From(from), varve.PageSize(scanPage), varve.PageBytes(scanPageBytes), varve.Sealed()) {
		if err != nil {
			return 0, err
		}
		if e.Version >= limit {
			return limit, nil
		}
		if !e.RecordedAt.Before(cutoff) {
			return e.Version, nil
		}
		p.r.ReadBytes += int64(e.Size())
		if p.r.ReadBytes >= p.s.cfg.MaxReadBytes {
			p.r.Incomplete = true
			return e.Version + 1, nil
		}
	}
	return limit, nil
}

// truncate removes the events of the stream of info from first up to
// before, in steps of TruncateStep, and returns how many it removed. Before
// each step it looks at the stream's version again and stops when it went
// down, or when the last event the step would remove is newer than the
// cut: the stream was deleted and written again since the cut was made.
func (p *pass) truncate(ctx context.Context, info varve.StreamInfo, first, before varve.Version) (int64, error) {
	if p.s.cfg.DryRun {
		return int64(before - first), nil
	}
	removed := int64(0)
	for at := first; at < before; {
		if !p.check(ctx) {
			return removed, nil
		}
		now, err := p.store.StreamInfo(ctx, info.Stream)
		switch {
		case err != nil:
			return removed, err
		case now.Deleted || now.Tombstoned || now.Version < info.Version:
			return removed, nil
		}
		next := min(before, at+TruncateStep)
		if h := p.s.cfg.Hooks.BeforeTruncate; h != nil {
			h(info.Stream, next)
		}
		if again, err := p.writtenAgain(ctx, info, next-1); err != nil || again {
			return removed, err
		}
		if err := p.store.Truncate(ctx, info.Stream, next); err != nil {
			return removed, err
		}
		removed += int64(next - at)
		at = next
	}
	return removed, nil
}

// writtenAgain reports whether the event at version v of the stream of
// info came after info was read: the stream was deleted and written again
// past its old version, and the cut, made for the events before, does not
// hold for it. An event that is gone is not written again.
func (p *pass) writtenAgain(ctx context.Context, info varve.StreamInfo, v varve.Version) (bool, error) {
	for e, err := range p.store.ReadStream(ctx, info.Stream, varve.From(v), varve.Limit(1), varve.Sealed()) {
		if err != nil {
			return false, err
		}
		return e.Version == v && info.LastPosition.Less(e.Position), nil
	}
	return false, nil
}

// fail counts err in the report, unless the pass is ending with its
// context.
func (p *pass) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		p.check(ctx)
		return
	}
	p.r.problem(err)
}

// gone reports an error that says the stream went away: deleted or
// tombstoned since it was listed.
func gone(err error) bool {
	return errors.Is(err, varve.ErrStreamNotFound) || errors.Is(err, varve.ErrStreamDeleted)
}

// trimPolicies truncates PoliciesStream to its last KeptPolicySets sets,
// which Set does too but may have failed to.
func (p *pass) trimPolicies(ctx context.Context) {
	info, err := p.store.StreamInfo(ctx, PoliciesStream)
	if gone(err) {
		return
	}
	if err == nil {
		err = trim(ctx, p.store, PoliciesStream, info.Version, KeptPolicySets)
	}
	if err != nil {
		p.fail(ctx, fmt.Errorf("trim %s: %w", PoliciesStream, err))
	}
}

// reclaim asks a backend that gives space back only when asked to do so.
func (p *pass) reclaim(ctx context.Context) {
	r, ok := varve.As[SpaceReclaimer](p.store.Backend())
	if !ok {
		return
	}
	n, err := r.ReclaimSpace(ctx)
	p.r.Reclaimed += n
	if err != nil {
		p.fail(ctx, fmt.Errorf("reclaim space: %w", err))
	}
}

// record appends the report to RunsStream and trims it to KeptReports.
func (p *pass) record(ctx context.Context) error {
	data, err := json.Marshal(p.r)
	if err != nil {
		return err
	}
	res, err := p.store.System().Append(ctx, RunsStream, varve.Any, varve.NewEvent(RunType, data))
	if err != nil {
		return err
	}
	p.r.Position = res.Position
	if err := trim(ctx, p.store, RunsStream, res.LastVersion, KeptReports); err != nil {
		return fmt.Errorf("trim %s: %w", RunsStream, err)
	}
	return nil
}
