package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/projection"
	"github.com/varve-go/varve/subscription"
)

// The dashboard's defaults and bounds.
const (
	DefaultSampleInterval = 2 * time.Second
	MinSampleInterval     = 100 * time.Millisecond
	// DashboardWindow is the time the dashboard's samples cover: it keeps
	// DashboardWindow / SampleInterval of them (at least 2), within
	// MaxDashboardBytes of JSON. The sampler also stops after this long
	// without a dashboard request, until the next one.
	DashboardWindow   = 5 * time.Minute
	MaxDashboardBytes = 4 << 20
	// MaxDashboardConsumers bounds the consumers a sample tracks: the
	// first ones by name.
	MaxDashboardConsumers = 50
	// DashboardCountLimit bounds the events a sample counts as appended
	// since the previous one; a count that reaches it says "at least".
	DashboardCountLimit = 10_000
	// maxSampleError bounds the text of one error kept in a sample.
	maxSampleError = 300
)

// sample is what the dashboard shows of one moment, as the API sends it.
type sample struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	// Head is $all's last position; null when the store did not say.
	Head *varve.Position `json:"head"`
	// Events counts the events appended to $all, system streams included,
	// after the previous sample's head up to this one's, read from $all:
	// what every writer appended, in this process or another. Null on the
	// first sample of a run; EventsAtLeast when the count stopped at
	// DashboardCountLimit.
	Events        *int     `json:"events"`
	EventsAtLeast bool     `json:"events_at_least"`
	EventsPerSec  *float64 `json:"events_per_sec"`
	// Server is what the calls made through this server's store did
	// since the previous sample (Config.Meter); null without a Meter and
	// on the first sample of a run.
	Server *meterSample `json:"through_server"`
	// SizeBytes is what the backend says the store takes; null when it
	// cannot say.
	SizeBytes          *int64           `json:"size_bytes"`
	Consumers          []consumerSample `json:"consumers"`
	ConsumersTruncated bool             `json:"consumers_truncated"`
	Errors             []string         `json:"errors"`
}

// consumerSample is one consumer in a sample, as package delivery
// inspects it for the subscriptions page.
type consumerSample struct {
	Name       string          `json:"name"`
	Checkpoint *varve.Position `json:"checkpoint"`
	Lag        int             `json:"lag"`
	LagMore    bool            `json:"lag_more"`
	// OldestMS is the age of the oldest event the consumer has yet to
	// process (the sample's time less the first such event's RecordedAt),
	// in milliseconds; null when it is caught up, has no checkpoint, or
	// the first subscription.OldestScan events after its checkpoint hold none it reads.
	OldestMS *int64 `json:"oldest_unprocessed_ms"`
	Running  *int   `json:"running"`
	Seen     bool   `json:"seen"`
}

// kept is a sample in the ring: its JSON, made once, so that every
// client gets the same bytes.
type kept struct {
	seq   int64
	time  time.Time
	raw   json.RawMessage
	names []string
}

func (k kept) bytes() int {
	n := len(k.raw)
	for _, s := range k.names {
		n += len(s) + 16
	}
	return n
}

// sampler samples the store for the dashboard: one goroutine, started by
// the first dashboard request, stopped by Server.Close or after
// DashboardWindow without a request. It keeps the newest samples in a
// ring bounded in count and bytes.
type sampler struct {
	s          *Server
	interval   time.Duration
	idle       time.Duration
	max        int // samples kept
	maxBytes   int
	consumers  int // consumers tracked
	countLimit int

	mu      sync.Mutex
	ring    []kept // oldest first
	bytes   int
	seq     int64
	running bool
	closed  bool
	seen    time.Time // the last dashboard request
	wg      sync.WaitGroup
}

func newSampler(s *Server) *sampler {
	return &sampler{
		s: s, interval: s.cfg.SampleInterval, idle: DashboardWindow,
		max:      max(2, int(DashboardWindow/s.cfg.SampleInterval)),
		maxBytes: MaxDashboardBytes, consumers: MaxDashboardConsumers, countLimit: DashboardCountLimit,
	}
}

// touch notes a dashboard request and starts the sampler if it is not
// running; it reports whether it runs.
func (d *sampler) touch() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = time.Now()
	if !d.running && !d.closed && d.s.life.Err() == nil {
		d.running = true
		d.wg.Add(1)
		go d.run()
	}
	return d.running
}

// close stops the sampler for good and waits for its goroutine; the
// Server's life has ended before.
func (d *sampler) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.wg.Wait()
}

// mark is where a sample found $all, for the next one.
type mark struct {
	time time.Time
	head varve.Position
}

func (d *sampler) run() {
	defer d.wg.Done()
	t := time.NewTicker(d.interval)
	defer t.Stop()
	var prev *mark
	for {
		prev = d.sample(prev)
		select {
		case <-d.s.life.Done():
		case <-t.C:
		}
		d.mu.Lock()
		if d.s.life.Err() != nil || time.Since(d.seen) > d.idle {
			d.running = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
}

// sample takes one sample and keeps it; prev is the previous sample's
// mark in this run (nil for the first). Errors are recorded in the sample.
func (d *sampler) sample(prev *mark) *mark {
	s := d.s
	ctx, cancel := context.WithTimeout(context.WithValue(s.life, unmetered{}, true), s.cfg.RequestTimeout)
	defer cancel()
	now := time.Now()
	out := sample{Time: now.UTC(), Consumers: []consumerSample{}, Errors: []string{}}
	failed := func(what string, err error) {
		msg := what + ": " + err.Error()
		if len(msg) > maxSampleError {
			msg = msg[:maxSampleError] + "…"
		}
		out.Errors = append(out.Errors, msg)
	}
	if s.cfg.Meter != nil {
		m := s.cfg.Meter.take(now)
		if prev != nil {
			out.Server = &m
		}
	}
	var next *mark
	h, err := s.budget.take(ctx, s.lagHold())
	if err != nil {
		failed("read budget", err)
		d.keep(out)
		return nil
	}
	defer h.done()
	if head, err := s.store.LastPosition(ctx); err != nil {
		failed("$all head", err)
	} else {
		out.Head, next = &head, &mark{time: now, head: head}
		if prev != nil {
			n, more, err := d.countAppended(ctx, prev.head, head)
			if err != nil {
				failed("events appended", err)
			} else {
				rate := float64(n) / now.Sub(prev.time).Seconds()
				out.Events, out.EventsAtLeast, out.EventsPerSec = &n, more, &rate
			}
		}
	}
	if sz, ok := varve.As[interface {
		Size(context.Context) (int64, error)
	}](s.store.Backend()); ok {
		if n, err := sz.Size(ctx); err != nil {
			failed("store size", err)
		} else {
			out.SizeBytes = &n
		}
	}
	if err := d.sampleConsumers(ctx, now, &out); err != nil {
		failed("consumers", err)
	}
	d.keep(out)
	return next
}

// countAppended counts the events of $all after prev up to head, at most
// d.countLimit of them (more: there are more), reading pages of at most
// subscription.LagPageBytes.
func (d *sampler) countAppended(ctx context.Context, prev, head varve.Position) (n int, more bool, err error) {
	if !prev.Less(head) {
		return 0, false, nil
	}
	opts := []varve.AllOption{varve.PageSize(min(d.countLimit+1, 1000)), varve.PageBytes(subscription.LagPageBytes)}
	for e, err := range d.s.store.ReadAll(ctx, prev, opts...) {
		if err != nil {
			return n, false, err
		}
		if head.Less(e.Position) {
			break
		}
		if n == d.countLimit {
			return n, true, nil
		}
		n++
	}
	return n, false, nil
}

// sampleConsumers adds the first d.consumers consumers by name, as the
// subscriptions page shows them (projections' bookkeeping left out).
func (d *sampler) sampleConsumers(ctx context.Context, now time.Time, out *sample) error {
	store := d.s.store
	names, truncated, err := d.consumerNames(ctx)
	if err != nil {
		return err
	}
	out.ConsumersTruncated = truncated
	for _, name := range names {
		c, _, err := delivery.InspectConsumer(ctx, store, name, d.s.cfg.LagLimit)
		if errors.Is(err, delivery.ErrUnknownConsumer) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		cs := consumerSample{Name: c.Name, Checkpoint: c.Checkpoint, Lag: c.Lag, LagMore: c.LagMore, Running: c.Running, Seen: c.Seen}
		if c.Checkpoint != nil && !c.CaughtUp {
			at, ok, err := oldestUnprocessed(ctx, store, name, *c.Checkpoint)
			if err != nil {
				return fmt.Errorf("%s: oldest unprocessed event: %w", name, err)
			}
			if ok {
				ms := max(now.Sub(at).Milliseconds(), 0)
				cs.OldestMS = &ms
			}
		}
		out.Consumers = append(out.Consumers, cs)
	}
	return nil
}

// consumerNames lists the names delivery.Consumers lists (checkpoints and
// parked streams), less projections' bookkeeping: the first d.consumers by
// name; truncated says there are more.
func (d *sampler) consumerNames(ctx context.Context) (names []string, truncated bool, err error) {
	store := d.s.store
	set := map[string]bool{}
	if store.Capabilities().ListCheckpoints {
		after := ""
		for scanned := 0; len(set) <= d.consumers; {
			page, err := store.Checkpoints().List(ctx, varve.ListQuery{After: after, Limit: d.consumers + 1})
			if err != nil {
				return nil, false, err
			}
			for _, cp := range page.Checkpoints {
				if !projection.Bookkeeping(cp.Name) {
					set[cp.Name] = true
				}
			}
			if scanned += len(page.Checkpoints); page.Next == "" {
				break
			}
			if scanned >= delivery.MaxConsumers {
				truncated = true
				break
			}
			after = page.Next
		}
	}
	if store.Capabilities().ListStreams {
		page, err := store.Streams().List(ctx, varve.ListQuery{Prefix: delivery.ParkedStreamPrefix, Limit: d.consumers + 1}, true)
		if err != nil {
			return nil, false, err
		}
		for _, info := range page.Streams {
			set[strings.TrimPrefix(info.Stream, delivery.ParkedStreamPrefix)] = true
		}
	}
	names = make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) > d.consumers {
		names, truncated = names[:d.consumers], true
	}
	return names, truncated, nil
}

// oldestUnprocessed returns the RecordedAt of the first event after pos
// that the consumer name reads (subscription.Oldest, by its descriptor).
func oldestUnprocessed(ctx context.Context, store *varve.Store, name string, pos varve.Position) (time.Time, bool, error) {
	desc, _, err := subscription.Described(ctx, store, name)
	if err != nil {
		return time.Time{}, false, err
	}
	return subscription.Oldest(ctx, store, pos, desc)
}

// keep numbers the sample and adds it to the ring, dropping the oldest
// samples over the ring's count or bytes (the newest stays, however big).
func (d *sampler) keep(out sample) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	out.Seq = d.seq
	raw, err := json.Marshal(out)
	if err != nil {
		d.s.log.Error("dashboard sample", "err", err.Error())
		return
	}
	k := kept{seq: out.Seq, time: out.Time, raw: raw}
	for _, c := range out.Consumers {
		k.names = append(k.names, c.Name)
	}
	d.ring = append(d.ring, k)
	d.bytes += k.bytes()
	drop := 0
	for len(d.ring)-drop > 1 && (len(d.ring)-drop > d.max || d.bytes > d.maxBytes) {
		d.bytes -= d.ring[drop].bytes()
		drop++
	}
	d.ring = slices.Delete(d.ring, 0, drop)
}

// since selects the samples a request asks for: those after a sample's
// number (seq) or after a time (RFC 3339).
type since struct {
	seq  int64
	time time.Time
}

func parseSince(s string) (since, error) {
	if s == "" {
		return since{}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return since{seq: n}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return since{}, badRequest(`parameter since=%q: want a sample's number ("seq", from 0) or a time (RFC 3339, such as "2026-11-23T10:00:00Z")`, s)
	}
	return since{time: t}, nil
}

// after returns the samples after sc, oldest first, and the newest
// sample's number.
func (d *sampler) after(sc since) ([]kept, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := 0
	for i < len(d.ring) && (d.ring[i].seq <= sc.seq || !d.ring[i].time.After(sc.time)) {
		i++
	}
	return slices.Clone(d.ring[i:]), d.seq
}

// dashboard answers the dashboard's samples, starting the sampler if it
// is not running.
func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "since")
	if err != nil {
		return err
	}
	sc, err := parseSince(q.Get("since"))
	if err != nil {
		return err
	}
	running := s.dash.touch()
	samples, newest := s.dash.after(sc)
	raws := make([]json.RawMessage, len(samples))
	seen := map[string]bool{}
	names := []string{}
	for i, k := range samples {
		raws[i] = k.raw
		for _, n := range k.names {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return writeJSON(w, http.StatusOK, map[string]any{
		"interval_ms":   s.cfg.SampleInterval.Milliseconds(),
		"window_ms":     DashboardWindow.Milliseconds(),
		"max_samples":   s.dash.max,
		"sampling":      running,
		"measured":      s.cfg.Meter != nil,
		"count_limit":   s.dash.countLimit,
		"lag_limit":     s.cfg.LagLimit,
		"max_consumers": s.dash.consumers,
		"next":          newest,
		"samples":       raws,
		"consumers":     names,
	})
}
