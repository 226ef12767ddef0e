package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
	"github.com/varve-go/varve/delivery/webhook"
	"github.com/varve-go/varve/subscription"
)

// DeliverConfig configures DeliverBench: a matrix of concurrent delivery,
// with varve's per-stream order and checkpoints on.
type DeliverConfig struct {
	// Store is the URL of the store to fill and read, Label its name in
	// reports.
	Store string `json:"-"`
	Label string `json:"-"`
	// Transactions commits of EventsPerTx events each are appended, each
	// commit to one of Streams streams picked at random (seeded).
	Transactions int    `json:"transactions"`
	EventsPerTx  int    `json:"events_per_tx"`
	Streams      int    `json:"streams"`
	Seed         uint64 `json:"seed"`
	// Latencies (L) are the sink latencies: a loopback HTTP endpoint sleeps
	// L before it answers. Each latency gets one run per worker count (C),
	// the dispatcher's concurrency.
	Latencies []time.Duration   `json:"latencies_ns"`
	Workers   []int             `json:"workers"`
	Ordering  delivery.Ordering `json:"-"`
	// Duration caps each run; 0 means none: a run delivers everything.
	Duration time.Duration `json:"duration_ns"`
	// Rate caps the deliveries per second of a run; 0 means no cap.
	Rate float64 `json:"rate"`
	// Window and CheckpointInterval are the dispatcher's; 0 for defaults.
	Window             int           `json:"window"`
	CheckpointInterval time.Duration `json:"checkpoint_interval_ns"`
	// Poison streams (the first ones) are answered 500 and so are retried
	// and parked; 0 for none.
	Poison int `json:"poison"`
	// Sinks are what to measure: "http" (the webhook sink to the loopback
	// endpoint; the default), and two baselines for the same run: "func" (a
	// Go handler that sleeps L: the dispatcher without HTTP) and "raw-http"
	// (C goroutines that POST a payload of the same size to the endpoint in
	// a loop: no store, no dispatcher, no signature; the machine's HTTP
	// ceiling).
	Sinks []string `json:"sinks"`
	// Source is where the events come from: "store" (the default: Store
	// is filled with them once) or "postgres-cdc": the commits are real
	// writes to a table on the PostgreSQL server at CDCURL (wal_level=
	// logical), and every run captures them through one logical
	// replication slot while it delivers, so its figures include the
	// capture (see cdcSource).
	Source string `json:"source"`
	CDCURL string `json:"-"`
	// CDCRoutes are the routes of postgres-cdc to measure, each with every
	// latency, sink and worker count: "direct" (the default: the slot's
	// changes go straight into the dispatcher through a pgcdc.Source) and
	// "store" (they are appended to per-row streams of a fresh memory
	// store, which the dispatcher reads through a subscription).
	CDCRoutes []string `json:"cdc_routes,omitempty"`
	route     string   // of the run
	// Log receives a line per run as it finishes; nil for none.
	Log io.Writer `json:"-"`
}

// The sources of DeliverConfig.
const (
	SourceStore = "store"
	SourceCDC   = "postgres-cdc"
)

// The routes of postgres-cdc (DeliverConfig.CDCRoutes).
const (
	RouteDirect = "direct"
	RouteStore  = "store"
)

// DeliverResult is one run of DeliverBench: the shared fields of its row
// and, embedded, the row's detail.
type DeliverResult struct {
	Store string `json:"store"`
	// Route is the postgres-cdc route (direct or store); empty for the
	// store source.
	Route        string `json:"cdc_route,omitempty"`
	Streams      int    `json:"streams"`
	Transactions int    `json:"transactions"`
	// Delivered is what the run delivered of Events (less when the time
	// cap or an interrupt ended it).
	Delivered  int64         `json:"delivered"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	EventsPerS float64       `json:"events_per_sec"`
	// Latency is the latency of one delivery as the dispatcher sees it:
	// the sink's call, retries apart, waits for the rate cap excluded.
	Latency Latency `json:"latency"`
	// Efficiency is EventsPerS / (C / L): 1 when every worker is busy with
	// the sink all the time.
	Efficiency float64 `json:"efficiency"`
	// Stopped says why the run ended: budget (all delivered), duration or
	// interrupted.
	Stopped string `json:"stopped"`
	// Poison is the number of streams that always fail (parked on purpose).
	Poison int `json:"poison_streams"`
	DeliverDetail
}

// DeliverDetail is what a deliver-bench row holds beyond the shared fields.
type DeliverDetail struct {
	Sink      string        `json:"sink"`
	Ordering  string        `json:"ordering"`
	SinkDelay time.Duration `json:"sink_latency_ns"`
	Workers   int           `json:"workers"`
	// Events is what the run had to deliver.
	Events      int     `json:"events"`
	CommitsPerS float64 `json:"commits_per_sec"`
	// Requests is what the endpoint served; Retries and Parked are the
	// dispatcher's counters.
	Requests uint64 `json:"requests"`
	// CPUPerEvent is the process's CPU time (user + system, the loopback
	// endpoint's included) per event.
	CPUPerEvent time.Duration `json:"cpu_per_event_ns"`
	Retries     uint64        `json:"retries"`
	Parked      uint64        `json:"parked"`
	// OrderViolations counts events the endpoint got before an earlier
	// event of their stream (expected with ordering none).
	OrderViolations uint64 `json:"order_violations"`
	Checkpoint      string `json:"checkpoint"`
}

// newDeliverResult starts the result of a run of sinkKind at latency on c
// workers.
func newDeliverResult(cfg DeliverConfig, sinkKind string, latency time.Duration, c int) DeliverResult {
	return DeliverResult{Store: cfg.Label, Poison: cfg.Poison, Streams: cfg.Streams, Transactions: cfg.Transactions,
		DeliverDetail: DeliverDetail{Sink: sinkKind, Ordering: cfg.Ordering.String(), SinkDelay: latency, Workers: c, Events: cfg.Transactions * cfg.EventsPerTx}}
}

// stopped says why a run ended: interrupted (ctx ended), duration (its
// time cap passed) or budget.
func stopped(ctx context.Context, capped bool) string {
	switch {
	case ctx.Err() != nil:
		return "interrupted"
	case capped:
		return "duration"
	}
	return "budget"
}

// rates fills the figures that follow from Delivered and Elapsed; cpu is
// the process's CPU time at the start of the run.
func (r *DeliverResult) rates(cfg DeliverConfig, cpu time.Duration) {
	if now, ok := processCPU(); ok && r.Delivered > 0 {
		r.CPUPerEvent = (now - cpu) / time.Duration(r.Delivered)
	}
	sec := r.Elapsed.Seconds()
	r.CommitsPerS = float64(r.Delivered) / float64(cfg.EventsPerTx) / sec
	r.EventsPerS = float64(r.Delivered) / sec
	r.Efficiency = r.EventsPerS / (float64(r.Workers) / r.SinkDelay.Seconds())
}

func (c *DeliverConfig) withDefaults() error {
	if c.Store == "" {
		c.Store = "memory:"
	}
	if c.Transactions <= 0 || c.EventsPerTx <= 0 || c.Streams <= 0 || len(c.Latencies) == 0 || len(c.Workers) == 0 || c.Poison < 0 || c.Poison > c.Streams || c.Duration < 0 || c.Rate < 0 {
		return fmt.Errorf("lab: deliver-bench: %w: need transactions, events per commit, streams, latencies and workers > 0, and poison within streams", varve.ErrInvalidArgument)
	}
	for _, l := range c.Latencies {
		if l <= 0 {
			return fmt.Errorf("lab: deliver-bench: %w: latency %v", varve.ErrInvalidArgument, l)
		}
	}
	if len(c.Sinks) == 0 {
		c.Sinks = []string{"http"}
	}
	if c.Source == "" {
		c.Source = SourceStore
	}
	switch c.Source {
	case SourceStore:
		if len(c.CDCRoutes) > 0 {
			return fmt.Errorf("lab: deliver-bench: %w: routes are for source %s", varve.ErrInvalidArgument, SourceCDC)
		}
	case SourceCDC:
		if c.CDCURL == "" || c.Poison > 0 {
			return fmt.Errorf("lab: deliver-bench: %w: source %s needs the URL of a PostgreSQL server with wal_level=logical, and no poison streams", varve.ErrInvalidArgument, SourceCDC)
		}
		if len(c.CDCRoutes) == 0 {
			c.CDCRoutes = []string{RouteDirect}
		}
		for _, r := range c.CDCRoutes {
			if r != RouteDirect && r != RouteStore {
				return fmt.Errorf("lab: deliver-bench: %w: route %q, want %s or %s", varve.ErrInvalidArgument, r, RouteDirect, RouteStore)
			}
		}
	default:
		return fmt.Errorf("lab: deliver-bench: %w: source %q, want %s or %s", varve.ErrInvalidArgument, c.Source, SourceStore, SourceCDC)
	}
	for _, s := range c.Sinks {
		if s != "http" && s != "func" && s != "raw-http" {
			return fmt.Errorf("lab: deliver-bench: %w: sink %q, want http, func or raw-http", varve.ErrInvalidArgument, s)
		}
	}
	for _, n := range c.Workers {
		if n <= 0 {
			return fmt.Errorf("lab: deliver-bench: %w: %d workers", varve.ErrInvalidArgument, n)
		}
	}
	return nil
}

// DeliverBench fills a store once and then, for every latency and
// concurrency, delivers all of it from the beginning through a
// subscription, a dispatcher and the webhook sink to a loopback HTTP
// endpoint that sleeps the latency; the elapsed time runs from the start of
// the dispatcher until the checkpoint covers the last event (or the time
// cap). When ctx ends it returns the runs so far, the cut-short one last,
// with an error that wraps ctx's.
func DeliverBench(ctx context.Context, cfg DeliverConfig) ([]DeliverResult, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	var (
		store *varve.Store
		end   varve.Position
		src   *cdcSource
		err   error
	)
	if cfg.Source == SourceCDC {
		if src, err = newCDCSource(ctx, cfg); err != nil {
			return nil, scrubErr(err)
		}
		defer src.drop()
		cfg.Label = SourceCDC + " " + Redact(cfg.CDCURL)
	} else {
		if store, err = Open(ctx, cfg.Store); err != nil {
			return nil, err
		}
		defer store.Close()
		if cfg.Label == "" {
			cfg.Label = Redact(cfg.Store)
		}
		if end, err = fillDeliver(ctx, store, cfg); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("lab: deliver-bench interrupted while filling the store: %w", context.Cause(ctx))
			}
			return nil, err
		}
	}
	ep, err := startEndpoint(cfg.Poison)
	if err != nil {
		return nil, err
	}
	defer ep.close()
	var out []DeliverResult
	routes := cfg.CDCRoutes
	if len(routes) == 0 {
		routes = []string{""}
	}
	for _, l := range cfg.Latencies {
		for _, sink := range cfg.Sinks {
			for i, route := range routes {
				if sink == "raw-http" && i > 0 {
					break // no route to it
				}
				for _, c := range cfg.Workers {
					run := deliverRun
					if sink == "raw-http" {
						run = rawHTTPRun
					}
					cfg.route = route
					r, err := run(ctx, store, end, src, ep, cfg, sink, l, c)
					if ctx.Err() != nil {
						if r.Delivered > 0 {
							out = append(out, r)
						}
						return out, fmt.Errorf("lab: deliver-bench interrupted: %w", context.Cause(ctx))
					}
					if err != nil {
						return out, scrubErr(err)
					}
					out = append(out, r)
					if cfg.Log != nil {
						fmt.Fprintf(cfg.Log, "%s%s %v x %d workers: %.0f events/s, efficiency %.3f, %v, elapsed %v\n", routeLabel(route), sink, l, c, r.EventsPerS, r.Efficiency, r.Latency, r.Elapsed.Round(time.Millisecond))
					}
				}
			}
		}
	}
	return out, nil
}

func fillDeliver(ctx context.Context, store *varve.Store, cfg DeliverConfig) (varve.Position, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	data := []byte(`{"order":"o-1","amount":40,"currency":"EUR"}`)
	evs := make([]varve.Event, cfg.EventsPerTx)
	var last varve.Position
	for range cfg.Transactions {
		for i := range evs {
			evs[i] = varve.Event{Type: "BenchEvent", Data: data}
		}
		res, err := store.Append(ctx, fmt.Sprintf("bench-%d", rng.IntN(cfg.Streams)), varve.Any, evs...)
		if err != nil {
			return last, fmt.Errorf("lab: deliver-bench: fill: %w", err)
		}
		last = res.Position
	}
	return last, nil
}

// deliverRun delivers store's events up to end, or, with src, the events
// src captures into a fresh memory store as the run goes.
func deliverRun(ctx context.Context, store *varve.Store, end varve.Position, src *cdcSource, ep *endpoint, cfg DeliverConfig, sinkKind string, latency time.Duration, c int) (DeliverResult, error) {
	name := fmt.Sprintf("deliver-bench-%s-%v-c%d-%v", sinkKind, latency, c, cfg.Ordering)
	res := newDeliverResult(cfg, sinkKind, latency, c)
	ep.reset(latency)
	if cfg.route != "" {
		res.Route = cfg.route
		res.Store = SourceCDC + " " + cfg.route + " " + Redact(cfg.CDCURL)
	}
	var source delivery.Source
	var direct *directRun
	if cfg.route == RouteDirect {
		dr, err := src.direct(ctx, name, res.Events)
		if err != nil {
			return res, err
		}
		defer dr.close()
		direct, source = dr, dr
	} else {
		if src != nil {
			s, err := Open(ctx, "memory:")
			if err != nil {
				return res, err
			}
			defer s.Close()
			store = s
		}
		sub, err := subscription.Open(ctx, store, subscription.Config{Name: name, Start: subscription.FromBeginning})
		if err != nil {
			return res, err
		}
		source = sub
	}
	var next delivery.Sink = ep.handler(latency)
	if sinkKind == "http" {
		hook, err := webhook.New(webhook.Config{
			URL: ep.url, Secret: []byte("deliver-bench"), MaxConcurrency: c, Timeout: max(10*time.Second, 10*latency),
		})
		if err != nil {
			return res, err
		}
		defer hook.Close()
		next = hook
	}
	sink := &timedSink{next: next, h: NewHistogram(), pace: newPaced(ctx, cfg.Rate, cfg.Duration)}
	defer sink.pace.stop()
	dcfg := delivery.Config{
		Concurrency: c, Ordering: cfg.Ordering, Window: cfg.Window, CheckpointInterval: cfg.CheckpointInterval,
		Retry:  subscription.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond},
		Logger: slog.New(slog.DiscardHandler),
	}
	if direct != nil {
		dcfg.Parked = direct.parked
	}
	d, err := delivery.NewFromSource(source, sink, dcfg)
	if err != nil {
		return res, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	began := time.Now()
	cpu, _ := processCPU()
	go func() { done <- d.Run(runCtx) }()
	waitCtx, cancelWait := ctx, context.CancelFunc(func() {})
	if cfg.Duration > 0 {
		waitCtx, cancelWait = context.WithTimeout(ctx, cfg.Duration)
	}
	var werr error
	switch {
	case direct != nil:
		// The run ends when the dispatcher has delivered the last change
		// the source read.
		end, werr = direct.wait(waitCtx)
	case src != nil:
		// The capture runs beside the dispatcher; the run ends when the
		// dispatcher has delivered what the capture appended last.
		end, werr = src.capture(waitCtx, store, res.Events)
	}
	if werr == nil {
		werr = d.WaitFor(waitCtx, end)
	}
	capped := werr != nil && ctx.Err() == nil && waitCtx.Err() != nil
	cancelWait()
	res.Elapsed = time.Since(began)
	stop()
	err = <-done
	if res.Stopped = stopped(ctx, capped); res.Stopped == "budget" && (err != nil || werr != nil) {
		return res, fmt.Errorf("lab: deliver-bench %v x %d workers: %w", latency, c, errors.Join(werr, err))
	}
	st := d.Stats()
	sink.mu.Lock()
	res.Latency = LatencyOf(sink.h)
	res.Delivered = sink.ok
	sink.mu.Unlock()
	if res.Stopped == "budget" {
		res.Delivered = int64(res.Events)
	}
	res.rates(cfg, cpu)
	if direct != nil {
		// The slot got the checkpoint: the source acknowledged for real.
		res.Checkpoint = direct.src.Flushed().String()
	}
	res.Requests, res.OrderViolations = ep.requests.Load(), ep.violations.Load()
	res.Retries, res.Parked = st.Retries, st.Parked
	if res.Checkpoint == "" {
		res.Checkpoint = st.Saved.String()
	}
	return res, nil
}

// rawHTTPRun posts T*E payloads to the endpoint from C goroutines, with a
// client tuned like the webhook's: the HTTP ceiling of the machine.
func rawHTTPRun(ctx context.Context, _ *varve.Store, _ varve.Position, _ *cdcSource, ep *endpoint, cfg DeliverConfig, sinkKind string, latency time.Duration, c int) (DeliverResult, error) {
	res := newDeliverResult(cfg, sinkKind, latency, c)
	res.Store, res.Ordering, res.Poison = "-", "-", 0
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	pace := newPaced(runCtx, cfg.Rate, 0)
	defer pace.stop()
	ep.reset(latency)
	body := delivery.AppendPayload(nil, delivery.Delivery{
		Subscription: "raw-http", Key: "raw-http:1", Attempt: 1,
		Event: varve.RecordedEvent{ID: varve.NewEventID(), Type: "BenchEvent", Stream: "raw", Version: 1,
			Position: varve.Position{Seq: 1}, RecordedAt: time.Now(), Data: []byte(`{"order":"o-1","amount":40,"currency":"EUR"}`)},
	})
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost, t.MaxIdleConnsPerHost = c, c
	defer t.CloseIdleConnections()
	client := &http.Client{Transport: t}
	h := NewHistogram()
	var (
		mu    sync.Mutex
		left  atomic.Int64
		wg    sync.WaitGroup
		first error
		sent  int64
	)
	left.Store(int64(res.Events))
	began := time.Now()
	cpu, _ := processCPU()
	for range c {
		wg.Go(func() {
			for left.Add(-1) >= 0 && runCtx.Err() == nil {
				if ok, _ := pace.wait(); !ok {
					return
				}
				t0 := time.Now()
				req, err := http.NewRequestWithContext(runCtx, http.MethodPost, ep.url, bytes.NewReader(body))
				if err == nil {
					req.Header.Set("Content-Type", "application/json")
					var resp *http.Response
					if resp, err = client.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
				el := time.Since(t0)
				if runCtx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				_ = h.RecordValue(int64(el))
				sent++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(began)
	res.Delivered = sent
	res.Stopped = stopped(ctx, runCtx.Err() != nil)
	res.rates(cfg, cpu)
	if first != nil {
		return res, fmt.Errorf("lab: deliver-bench raw-http %v x %d workers: %w", latency, c, first)
	}
	res.Latency = LatencyOf(h)
	res.Requests = ep.requests.Load()
	return res, nil
}

// timedSink records how long each delivery takes, and counts the ones
// that succeeded; under a rate cap a delivery first waits for its turn.
type timedSink struct {
	next delivery.Sink
	pace *paced
	mu   sync.Mutex
	h    *hdrhistogram.Histogram
	ok   int64
}

func (s *timedSink) Deliver(ctx context.Context, d delivery.Delivery) error {
	if ok, err := s.pace.wait(); !ok {
		if err == nil {
			err = context.DeadlineExceeded // the time cap passed
		}
		return err
	}
	t := time.Now()
	err := s.next.Deliver(ctx, d)
	el := time.Since(t)
	s.mu.Lock()
	_ = s.h.RecordValue(int64(el))
	if err == nil {
		s.ok++
	}
	s.mu.Unlock()
	return err
}

// endpoint is the HTTP sink of the bench: it sleeps the latency, answers
// 500 for poison streams and counts events that overtake an earlier event
// of their stream.
type endpoint struct {
	srv        *http.Server
	served     chan struct{}
	url        string
	poison     int
	latency    atomic.Int64
	requests   atomic.Uint64
	violations atomic.Uint64
	mu         sync.Mutex
	last       map[string]varve.Version
}

func startEndpoint(poison int) (*endpoint, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lab: deliver-bench: listen: %w", err)
	}
	ep := &endpoint{url: "http://" + ln.Addr().String() + "/events", poison: poison, last: map[string]varve.Version{}, served: make(chan struct{})}
	ep.srv = &http.Server{Handler: ep, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(ep.served)
		_ = ep.srv.Serve(ln)
	}()
	return ep, nil
}

func (ep *endpoint) reset(latency time.Duration) {
	ep.latency.Store(int64(latency))
	ep.requests.Store(0)
	ep.violations.Store(0)
	ep.mu.Lock()
	clear(ep.last)
	ep.mu.Unlock()
}

func (ep *endpoint) close() {
	ep.srv.Close()
	<-ep.served
}

func (ep *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read failed", http.StatusServiceUnavailable)
		return
	}
	stream, version, err := streamVersion(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	time.Sleep(time.Duration(ep.latency.Load()))
	if !ep.accept(stream, version) {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handler is the endpoint as a Go sink, without HTTP.
func (ep *endpoint) handler(latency time.Duration) delivery.Sink {
	return delivery.SinkFunc(func(ctx context.Context, d delivery.Delivery) error {
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if !ep.accept(d.Event.Stream, d.Event.Version) {
			return errors.New("poison stream")
		}
		return nil
	})
}

// accept counts a request and reports whether it succeeds; it counts order
// violations of the ones that do.
func (ep *endpoint) accept(stream string, version varve.Version) bool {
	ep.requests.Add(1)
	if ep.poison > 0 && isPoison(stream, ep.poison) {
		return false
	}
	ep.mu.Lock()
	if last := ep.last[stream]; version != last+1 && version > last {
		ep.violations.Add(1)
	}
	ep.last[stream] = max(ep.last[stream], version)
	ep.mu.Unlock()
	return true
}

// streamVersion reads the stream and version of a payload. It looks them up
// where delivery.AppendPayload writes them and decodes the JSON only when
// that fails, so the endpoint costs little CPU.
func streamVersion(body []byte) (string, varve.Version, error) {
	if _, rest, ok := bytes.Cut(body, []byte(`,"stream":"`)); ok {
		if stream, rest, ok := bytes.Cut(rest, []byte(`","version":`)); ok && bytes.IndexByte(stream, '\\') < 0 {
			end := 0
			for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
				end++
			}
			if v, err := strconv.ParseUint(string(rest[:end]), 10, 64); err == nil {
				return string(stream), v, nil
			}
		}
	}
	var p delivery.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		return "", 0, fmt.Errorf("bad payload: %w", err)
	}
	return p.Stream, p.Version, nil
}

func isPoison(stream string, n int) bool {
	var i int
	if _, err := fmt.Sscanf(strings.TrimPrefix(stream, "bench-"), "%d", &i); err != nil {
		return false
	}
	return i < n
}

// PrintDeliverTable writes one table per sink and latency.
func PrintDeliverTable(w io.Writer, rs []DeliverResult) error {
	var b strings.Builder
	var t *textTable
	few := false
	flush := func() {
		if t != nil {
			t.write(&b)
		}
	}
	lastL, lastSink, lastStore := time.Duration(-1), "", ""
	for _, r := range rs {
		if r.SinkDelay != lastL || r.Sink != lastSink || r.Store != lastStore {
			flush()
			if lastSink != "" {
				b.WriteString("\n")
			}
			lastL, lastSink, lastStore = r.SinkDelay, r.Sink, r.Store
			fmt.Fprintf(&b, "%s sink, %v per request, ordering %s, %s commits x %d events over %s streams, store %s\n",
				r.Sink, r.SinkDelay, r.Ordering, GroupDigits(float64(r.Transactions)), r.Events/max(r.Transactions, 1), GroupDigits(float64(r.Streams)), r.Store)
			t = &textTable{header: append(append([]string{"WORKERS", "EVENTS/S", "EFFICIENCY"}, LatencyHead...),
				"ELAPSED", "CPU/EVENT", "RETRIES", "PARKED", "ORDER ERRS", "STOPPED"), left: 0}
		}
		few = few || r.Latency.FewSamples && r.Latency.Samples > 0
		row := []string{strconv.Itoa(r.Workers), GroupDigits(r.EventsPerS), fmt.Sprintf("%.3f", r.Efficiency)}
		row = append(row, r.Latency.Cells()...)
		row = append(row, fmtDur(r.Elapsed), fmtDur(r.CPUPerEvent), strconv.FormatUint(r.Retries, 10), strconv.FormatUint(r.Parked, 10),
			strconv.FormatUint(r.OrderViolations, 10), r.Stopped)
		t.add(row...)
	}
	flush()
	if few {
		b.WriteString(FewSamplesNote + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Rows returns a row per run. A run's errors are the events that reached
// the sink out of their stream's order under per-stream ordering, and the
// events parked although no stream was poisoned; its ratio is the
// efficiency.
func DeliverRows(rs []DeliverResult) []Row {
	rows := []Row{}
	for _, r := range rs {
		row := Row{Store: r.Store, Name: fmt.Sprintf("%s %v x %d workers", r.Sink, r.SinkDelay, r.Workers), Unit: "events",
			Count: r.Delivered, Rate: r.EventsPerS, Elapsed: r.Elapsed, Latency: r.Latency, Ratio: ratioPtr(r.Efficiency), Stopped: r.Stopped,
			Detail: r.DeliverDetail}
		if r.Ordering == delivery.PerStream.String() {
			row.Errors += int64(r.OrderViolations)
		}
		if r.Poison == 0 {
			row.Errors += int64(r.Parked)
		}
		rows = append(rows, row)
	}
	return rows
}

func routeLabel(route string) string {
	if route == "" {
		return ""
	}
	return route + " "
}
