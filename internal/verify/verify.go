// Package verify checks a store's promises from outside, over the public
// API only, so that it runs against any deployment: writers append with
// expected versions to overlapping streams (conflicts are the point) and
// record each append's outcome as acknowledged, refused or unknown;
// readers page through $all, and one through a category filter, as the
// writers go. At the end the whole log is read once more and checked:
//
//   - every acknowledged event is in $all exactly once;
//   - no refused event is in it; an event whose append had an unknown
//     outcome is in it at most once;
//   - $all's positions increase strictly, and each stream's versions are
//     1, 2, 3, ... in $all's order, with the events of an append together;
//   - every reader saw its filter's part of $all whole, in order, with
//     nothing skipped or repeated.
//
// Two consumers may run too, from before the writers start until they have
// handled the log through its end: a delivery split into segments under
// leases ([Config.DeliverySegments]) must have handed each of the run's
// events to its handler at least once, each stream's in version order
// (an event handed over again, after a segment changed hands or its
// dispatcher restarted, counts as redelivered); a projection
// ([Config.Projection]) must have applied each exactly once, in $all's
// order. A backend without what a consumer needs runs without it, and the
// Result says why.
//
// The run owns two categories named for its id, so other writers of the
// same store are left out of every check. Faults are the caller's: a test
// that kills servers, or an operator's own drill, while Run runs.
package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/varve-go/varve"
)

// Config is a run's shape.
type Config struct {
	// Writers append at once (default 4), each to Streams streams shared by
	// all writers (default 8).
	Writers, Streams int
	// Duration the writers run (default 10 s); Appends, when not 0, stops
	// each writer after that many appends instead.
	Duration time.Duration
	Appends  int
	// Stop, when not nil, stops the writers when it closes, instead of
	// Duration (Appends still bounds them).
	Stop <-chan struct{}
	// Seed makes the writers' choices replayable (0: a random seed, which
	// the Result names).
	Seed uint64
	// Run names the run's categories ("verify<Run>a", "verify<Run>b");
	// default a random id.
	Run string
	// LagWait bounds the re-reads of a final log that ends before the last
	// acknowledged append, as one answered by a lagging replica does
	// (default 10 s); past it, what the log misses is lost.
	LagWait time.Duration
	// AppendTimeout bounds one append (default 10 s): past it, its outcome
	// is unknown. It bounds each page a reader reads too: a request in
	// flight to a server that dies may get no answer at all.
	AppendTimeout time.Duration
	// DeliverySegments, when more than 0, runs a delivery of the run's
	// events to an in-process handler, split into that many segments (1:
	// one) under leases held by two holders in this process, as two
	// processes would hold them; at most MaxDeliverySegments. The store
	// must keep leases and list checkpoints; the segments' checkpoints and
	// leases stay in it, named "verify<Run>-delivery...".
	DeliverySegments int
	// LeaseTTL is the delivery's lease TTL (default DefaultLeaseTTL): a
	// segment changes hands, or is taken over from a holder whose renewals
	// fail, within it.
	LeaseTTL time.Duration
	// Projection runs a projection of the run's events whose checkpoint
	// is kept in memory.
	Projection bool

	skip int // tests: each consumer drops the skip-th event handed to it
}

// Outcome is what a writer learned of one append.
type Outcome int

// The outcomes of an append.
const (
	Acknowledged Outcome = iota // the store answered with its result
	Refused                     // a typed refusal (wrong expected version)
	Unknown                     // any other error: stored or not
)

// Append is one append as its writer recorded it.
type Append struct {
	Stream   string
	Expected varve.ExpectedVersion
	IDs      []uuid.UUID
	Outcome  Outcome
	// Position is the acknowledged append's last event's position.
	Position varve.Position
	Err      string
}

// Observation is what one reader saw: event ids in the order it read
// them, with their positions.
type Observation struct {
	Reader    string
	Filter    varve.Filter
	IDs       []uuid.UUID
	Positions []varve.Position
}

// History is everything a run recorded, for Check.
type History struct {
	Appends      []Append
	Observations []Observation
	// Log is the run's events of $all, read after the writers stopped.
	Log []varve.RecordedEvent
	// Category of a stream, as the store names it.
	Category func(stream string) string
	// Delivery and Projection are what the consumers handled; nil for one
	// that did not run.
	Delivery, Projection *Consumed
}

// Result is a run's figures and what Check found wrong.
type Result struct {
	Seed          uint64 `json:"seed"`
	Run           string `json:"run"`
	Acknowledged  int    `json:"acknowledged"`
	Refused       int    `json:"refused"`
	Unknown       int    `json:"unknown"`
	UnknownStored int    `json:"unknown_stored"` // unknown appends found in $all
	Events        int    `json:"events"`         // of the run in $all at the end
	ReaderEvents  int    `json:"reader_events"`  // events the readers saw, in all
	// Delivered counts the events the delivery handed to its handler,
	// Redelivered those of them handed over again, DeliveryRuns the
	// segments' dispatchers started (more than the segments: segments
	// changed hands or restarted); Projected the events the projection
	// applied; ConsumerRestarts the times a consumer failed (a server
	// away) and started again from its checkpoint.
	Delivered        int `json:"delivered"`
	Redelivered      int `json:"redelivered"`
	DeliveryRuns     int `json:"delivery_runs"`
	Projected        int `json:"projected"`
	ConsumerRestarts int `json:"consumer_restarts"`
	// NotRun names the consumers asked for that did not run, and why.
	NotRun  []string      `json:"not_run,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// From a writer's first failed append to its next acknowledged one:
	// the first such span, and the longest.
	FirstUnavailable   time.Duration `json:"first_unavailable_ns"`
	LongestUnavailable time.Duration `json:"longest_unavailable_ns"`
	Anomalies          []string      `json:"anomalies"` // the first 20
	AnomalyCount       int           `json:"anomaly_count"`
}

// OK reports whether the run found nothing wrong.
func (r Result) OK() bool { return r.AnomalyCount == 0 }

const maxAnomalies = 20

// Run runs the workload on s and checks it.
func Run(ctx context.Context, s *varve.Store, cfg Config) (Result, error) {
	if cfg.Writers <= 0 {
		cfg.Writers = 4
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 8
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.AppendTimeout <= 0 {
		cfg.AppendTimeout = 10 * time.Second
	}
	if cfg.LagWait <= 0 {
		cfg.LagWait = 10 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	if cfg.Run == "" {
		cfg.Run = strconv.FormatUint(rand.Uint64()%1e9, 36)
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.DeliverySegments < 0 || cfg.DeliverySegments > MaxDeliverySegments || cfg.LeaseTTL < varve.MinLeaseTTL || cfg.LeaseTTL > varve.MaxLeaseTTL {
		return Result{Seed: cfg.Seed, Run: cfg.Run}, fmt.Errorf("verify: %w: %d delivery segments (0..%d), lease ttl %s",
			varve.ErrInvalidArgument, cfg.DeliverySegments, MaxDeliverySegments, cfg.LeaseTTL)
	}
	start := time.Now()
	cats := []string{"verify" + cfg.Run + "a", "verify" + cfg.Run + "b"}
	sep := s.Config().CategorySeparator
	streams := make([]string, cfg.Streams)
	for i := range streams {
		streams[i] = cats[i%2] + sep + strconv.Itoa(i)
	}
	filters := map[string]varve.Filter{"all": {Categories: cats}, "category": {Categories: cats[:1]}}

	// The consumers start before the writers, and stop once they have
	// handled the log through its end (or a minute after the writers
	// stopped), or when ctx ends. Their context has no deadline, so that
	// a backend bounds each of their requests by its own timeout (NATS's
	// RequestTimeout): a request lost in a fault then fails and is tried
	// again, instead of waiting until ctx's deadline.
	cctx, stopConsumers := context.WithCancel(context.WithoutCancel(ctx))
	defer context.AfterFunc(ctx, stopConsumers)()
	var cg sync.WaitGroup
	defer func() {
		stopConsumers()
		cg.Wait()
	}()
	var notRun []string
	var dl, pj *consumer
	if cfg.DeliverySegments > 0 {
		if why := deliveryLacks(s); why != "" {
			notRun = append(notRun, "delivery: "+why)
		} else {
			dl = startDelivery(cctx, &cg, s, cfg, filters["all"])
		}
	}
	if cfg.Projection {
		var err error
		if pj, err = startProjection(cctx, &cg, s, cfg, filters["all"]); err != nil {
			return Result{Seed: cfg.Seed, Run: cfg.Run}, err
		}
	}

	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	switch {
	case cfg.Stop != nil:
		go func() {
			select {
			case <-cfg.Stop:
				stopWriters()
			case <-wctx.Done():
			}
		}()
	case cfg.Appends == 0:
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(wctx, cfg.Duration)
		defer cancel()
	}
	// Readers stop once they read through the end of the log, or a minute
	// after the writers did.
	rctx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()

	var wg sync.WaitGroup
	appends := make([][]Append, cfg.Writers)
	gaps := make([][]time.Duration, cfg.Writers)
	for w := range cfg.Writers {
		wg.Go(func() { appends[w], gaps[w] = write(wctx, s, cfg, w, streams) })
	}
	var rg sync.WaitGroup
	names := []string{"all", "category"}
	obs := make([]Observation, len(names))
	ends := make([]chan varve.Position, len(names))
	for i, name := range names {
		ends[i] = make(chan varve.Position, 1)
		rg.Go(func() { obs[i] = read(rctx, s, name, filters[name], cfg.AppendTimeout, ends[i]) })
	}
	wg.Wait()
	// The end of the log, and the log, are read again and again for a
	// minute at most while a server is away.
	// The log is read through the last acknowledged append at least: on a
	// replicated NATS stream a lagging replica may answer LastPosition.
	var acked varve.Position
	for _, as := range appends {
		for _, a := range as {
			if a.Outcome == Acknowledged && acked.Less(a.Position) {
				acked = a.Position
			}
		}
	}
	var last varve.Position
	err := retry(ctx, cfg.AppendTimeout, func(ctx context.Context) (err error) {
		if last, err = s.LastPosition(ctx); err == nil {
			err = s.WaitFor(ctx, last)
		}
		return err
	})
	var logEvents []varve.RecordedEvent
	// A read that ends before the last acknowledged append may have been
	// answered by a lagging replica: it is read again for up to
	// cfg.LagWait before the check calls what it misses lost.
	for short := time.Now().Add(cfg.LagWait); err == nil; pause(ctx, 200*time.Millisecond) {
		err = retry(ctx, 10*cfg.AppendTimeout, func(ctx context.Context) (err error) {
			logEvents, err = readLog(ctx, s, filters["all"], laterOf(last, acked))
			return err
		})
		if n := len(logEvents); err != nil || n > 0 && !logEvents[n-1].Position.Less(acked) || acked.IsZero() || time.Now().After(short) {
			break
		}
	}
	// Each reader stops at the last event of its filter: a filtered page
	// may go no further than its own events.
	for i, name := range names {
		f, end := filters[name], varve.Start
		for j := len(logEvents) - 1; j >= 0; j-- {
			if f.Match(&logEvents[j], sep) {
				end = logEvents[j].Position
				break
			}
		}
		ends[i] <- end
	}
	timer := time.AfterFunc(time.Minute, stopReaders)
	if err == nil {
		// A minute at most, without a deadline (see above).
		wctx, cancel := context.WithCancel(cctx)
		t := time.AfterFunc(consumerWait, cancel)
		for _, c := range []*consumer{dl, pj} {
			if c != nil {
				c.caughtUp(wctx, last)
			}
		}
		t.Stop()
		cancel()
	}
	stopConsumers()
	cg.Wait()
	rg.Wait()
	timer.Stop()
	if err != nil {
		return Result{Seed: cfg.Seed, Run: cfg.Run}, fmt.Errorf("verify: the end of $all: %w", err)
	}
	h := History{Log: logEvents, Observations: obs, Category: s.Category}
	if dl != nil {
		h.Delivery = &dl.c
	}
	if pj != nil {
		h.Projection = &pj.c
	}
	for _, a := range appends {
		h.Appends = append(h.Appends, a...)
	}
	res := Check(h)
	res.Seed, res.Run, res.Elapsed, res.NotRun = cfg.Seed, cfg.Run, time.Since(start), notRun
	for _, g := range gaps {
		for _, d := range g {
			if res.FirstUnavailable == 0 {
				res.FirstUnavailable = d
			}
			res.LongestUnavailable = max(res.LongestUnavailable, d)
		}
	}
	return res, nil
}

// payload is what each event carries, so that a reader can tell the run's
// events by their data too.
type payload struct {
	Writer int `json:"w"`
	N      int `json:"n"`
}

// write is one writer: appends of one or two events to a random stream at
// the version it believes the stream is at. It returns its appends and
// the spans without an acknowledged append after a failure.
func write(ctx context.Context, s *varve.Store, cfg Config, w int, streams []string) ([]Append, []time.Duration) {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(w)))
	known := map[string]varve.Version{}
	var out []Append
	var gaps []time.Duration
	var failedAt time.Time
	for n := 0; cfg.Appends == 0 || n < cfg.Appends; n++ {
		if ctx.Err() != nil {
			break
		}
		stream := streams[rng.IntN(len(streams))]
		evs := make([]varve.Event, 1+rng.IntN(2))
		a := Append{Stream: stream, Expected: varve.Exact(known[stream])}
		for i := range evs {
			data, _ := json.Marshal(payload{Writer: w, N: n})
			evs[i] = varve.NewEvent("Verified", data)
			a.IDs = append(a.IDs, evs[i].ID)
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.AppendTimeout)
		res, err := s.Append(actx, stream, a.Expected, evs...)
		cancel()
		var wev *varve.WrongExpectedVersionError
		switch {
		case err == nil:
			a.Outcome, a.Position = Acknowledged, res.Position
			known[stream] = res.LastVersion
			if !failedAt.IsZero() {
				gaps = append(gaps, time.Since(failedAt))
				failedAt = time.Time{}
			}
		case errors.As(err, &wev):
			a.Outcome, a.Err = Refused, err.Error()
			known[stream] = wev.Actual
		default:
			a.Outcome, a.Err = Unknown, err.Error()
			if failedAt.IsZero() {
				failedAt = time.Now()
			}
			// Learn the stream's version again before the next try.
			if info, err := s.StreamInfo(ctx, stream); err == nil {
				known[stream] = info.Version
			} else if errors.Is(err, varve.ErrStreamNotFound) {
				known[stream] = 0
			}
			if ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond) // a server away: no busy loop
			}
		}
		out = append(out, a)
	}
	return out, gaps
}

// read is one reader: pages of $all through f from the start, as the log
// grows, until it has read through the position end sends (after the
// writers stopped) or ctx ends.
func read(ctx context.Context, s *varve.Store, name string, f varve.Filter, timeout time.Duration, end <-chan varve.Position) Observation {
	o := Observation{Reader: name, Filter: f}
	after := varve.Start
	var buf []varve.RecordedEvent
	var stopAt *varve.Position
	for ctx.Err() == nil {
		if stopAt == nil {
			select {
			case p := <-end:
				stopAt = &p
			default:
			}
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		page, err := s.ReadAllPage(pctx, after, buf[:0], f, varve.PageSize(256))
		cancel()
		if err != nil {
			// A server away: try again, from where the reader is.
			pause(ctx, 20*time.Millisecond)
			continue
		}
		buf = page.Events
		for _, e := range page.Events {
			o.IDs = append(o.IDs, e.ID)
			o.Positions = append(o.Positions, e.Position)
		}
		if after.Less(page.Through) {
			after = page.Through
		}
		if page.Full {
			continue
		}
		if stopAt != nil && !after.Less(*stopAt) {
			return o
		}
		pause(ctx, 10*time.Millisecond)
	}
	return o
}

func laterOf(p, q varve.Position) varve.Position {
	if p.Less(q) {
		return q
	}
	return p
}

// retry calls f, each time with timeout, until it succeeds, ctx ends or a
// minute has passed; the error is f's last.
func retry(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	give := time.Now().Add(time.Minute)
	for {
		tctx, cancel := context.WithTimeout(ctx, timeout)
		err := f(tctx)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(give) {
			return err
		}
		pause(ctx, 50*time.Millisecond)
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// readLog reads the run's events of $all through last.
func readLog(ctx context.Context, s *varve.Store, f varve.Filter, last varve.Position) ([]varve.RecordedEvent, error) {
	var out []varve.RecordedEvent
	for e, err := range s.ReadAll(ctx, varve.Start, f) {
		if err != nil {
			return nil, fmt.Errorf("verify: read $all: %w", err)
		}
		if last.Less(e.Position) {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// Check checks a history (see the package comment).
func Check(h History) Result {
	var r Result
	bad := func(format string, args ...any) {
		r.AnomalyCount++
		if len(r.Anomalies) < maxAnomalies {
			r.Anomalies = append(r.Anomalies, fmt.Sprintf(format, args...))
		}
	}
	r.Events = len(h.Log)
	at := map[uuid.UUID]int{} // id -> index in the log
	versions := map[string]varve.Version{}
	for i, e := range h.Log {
		if i > 0 && !h.Log[i-1].Position.Less(e.Position) {
			bad("$all: position %v after %v", e.Position, h.Log[i-1].Position)
		}
		if j, dup := at[e.ID]; dup {
			bad("$all: event %s at %v and again at %v", e.ID, h.Log[j].Position, e.Position)
			continue
		}
		at[e.ID] = i
		if want := versions[e.Stream] + 1; e.Version != want {
			bad("stream %s: version %d at %v, want %d", e.Stream, e.Version, e.Position, want)
		}
		versions[e.Stream] = e.Version
	}
	for _, a := range h.Appends {
		found := 0
		for _, id := range a.IDs {
			if _, ok := at[id]; ok {
				found++
			}
		}
		switch a.Outcome {
		case Acknowledged:
			r.Acknowledged++
			if found != len(a.IDs) {
				bad("lost: an acknowledged append to %s at %v: %d of its %d events in $all", a.Stream, a.Position, found, len(a.IDs))
			}
		case Refused:
			r.Refused++
			if found > 0 {
				bad("a refused append to %s (%s) is in $all: %d of %d events", a.Stream, a.Err, found, len(a.IDs))
			}
		case Unknown:
			r.Unknown++
			if found > 0 {
				r.UnknownStored++
			}
			if found != 0 && found != len(a.IDs) {
				bad("torn: an append to %s of unknown outcome has %d of its %d events in $all", a.Stream, found, len(a.IDs))
			}
		}
		if found == len(a.IDs) && len(a.IDs) > 1 {
			first := at[a.IDs[0]]
			for k, id := range a.IDs[1:] {
				if at[id] != first+k+1 {
					bad("an append to %s is not contiguous in $all", a.Stream)
					break
				}
			}
		}
	}
	for _, o := range h.Observations {
		r.ReaderEvents += len(o.IDs)
		want := part(h, o.Filter)
		if len(o.IDs) < len(want) {
			bad("reader %s: read %d of the %d events of its filter in $all", o.Reader, len(o.IDs), len(want))
		}
		for i, id := range o.IDs {
			if i >= len(want) {
				bad("reader %s: event %s at %v is not in $all at the end", o.Reader, id, o.Positions[i])
				break
			}
			if want[i].ID != id {
				bad("reader %s: its event %d is %s at %v, $all has %s there (skipped or reordered)", o.Reader, i, id, o.Positions[i], want[i].ID)
				break
			}
		}
	}
	for _, c := range []*Consumed{h.Delivery, h.Projection} {
		if c != nil {
			checkConsumed(c, part(h, c.Filter), &r, bad)
		}
	}
	return r
}

// part is the log's events that pass f (by its categories).
func part(h History, f varve.Filter) []varve.RecordedEvent {
	var out []varve.RecordedEvent
	for _, e := range h.Log {
		if h.Category == nil || slices.Contains(f.Categories, h.Category(e.Stream)) || len(f.Categories) == 0 {
			out = append(out, e)
		}
	}
	return out
}
