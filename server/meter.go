package server

import (
	"context"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/varve-go/varve"
)

// maxLatencyMicros bounds the append latencies a Meter tells apart: a
// longer append counts as this long.
const maxLatencyMicros = int64(time.Minute / time.Microsecond)

// Meter counts the appends and reads made through one store and keeps the
// appends' latencies, for the dashboard's rates and percentiles: pass it as
// the store's varve.Config.Tracer and as Config.Meter. It implements
// [varve.AppendTracer] and [varve.ReadTracer]; what it sees is what that
// store's calls did in this process, not what other processes wrote to the
// same backend. The server's dashboard reads it once per sample and starts
// it afresh each time, so one Meter serves one Server. Reads that the
// dashboard's sampling itself makes are not counted.
//
// It is safe for concurrent use: a hook takes a mutex for a few
// nanoseconds; latencies go to an HdrHistogram (1 µs to 1 min, 2
// significant figures) of fixed size.
type Meter struct {
	mu    sync.Mutex
	since time.Time
	m     meterCounts
	hist  *hdrhistogram.Histogram
}

// meterCounts are what a Meter counted since it last started afresh.
type meterCounts struct {
	appends, appendErrors, events, readPages int64
}

// NewMeter returns a Meter that has counted nothing.
func NewMeter() *Meter {
	return &Meter{since: time.Now(), hist: hdrhistogram.New(1, maxLatencyMicros, 2)}
}

var (
	_ varve.AppendTracer = (*Meter)(nil)
	_ varve.ReadTracer   = (*Meter)(nil)
)

// TraceAppendStart implements [varve.AppendTracer].
func (m *Meter) TraceAppendStart(ctx context.Context, _ varve.TraceAppendStartData) context.Context {
	return ctx
}

// TraceAppendEnd implements [varve.AppendTracer]: it counts the append (as
// an error when it failed, conflicts included), its events when it
// committed, and its duration either way.
func (m *Meter) TraceAppendEnd(_ context.Context, d varve.TraceAppendEndData) {
	us := min(max(d.Duration.Microseconds(), 1), maxLatencyMicros)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m.appends++
	if d.Err != nil {
		m.m.appendErrors++
	} else {
		m.m.events += int64(d.Events)
	}
	_ = m.hist.RecordValue(us)
}

// unmetered marks the context of the dashboard's own reads.
type unmetered struct{}

// TraceReadStart implements [varve.ReadTracer].
func (m *Meter) TraceReadStart(ctx context.Context, _ varve.TraceReadStartData) context.Context {
	return ctx
}

// TraceReadEnd implements [varve.ReadTracer]: it counts the page read,
// unless the dashboard's sampling read it.
func (m *Meter) TraceReadEnd(ctx context.Context, _ varve.TraceReadEndData) {
	if ctx.Value(unmetered{}) != nil {
		return
	}
	m.mu.Lock()
	m.m.readPages++
	m.mu.Unlock()
}

// meterSample is what a Meter saw over one sample's time: appends made
// through this server's store, not the store's own rate.
type meterSample struct {
	Seconds       float64 `json:"seconds"`
	Appends       int64   `json:"appends"`
	AppendErrors  int64   `json:"append_errors"`
	Events        int64   `json:"events"`
	ReadPages     int64   `json:"read_pages"`
	AppendsPerSec float64 `json:"appends_per_sec"`
	EventsPerSec  float64 `json:"events_per_sec"`
	ReadsPerSec   float64 `json:"read_pages_per_sec"`
	// The latency percentiles of the appends, in microseconds; null
	// without an append.
	P50 *int64 `json:"append_p50_us"`
	P90 *int64 `json:"append_p90_us"`
	P99 *int64 `json:"append_p99_us"`
}

// take returns what m counted since it last started afresh, as of now,
// and starts afresh.
func (m *Meter) take(now time.Time) meterSample {
	m.mu.Lock()
	c, since := m.m, m.since
	var ps []int64
	if m.hist.TotalCount() > 0 {
		ps = m.hist.ValueAtPercentilesSlice([]float64{50, 90, 99})
	}
	m.m, m.since = meterCounts{}, now
	m.hist.Reset()
	m.mu.Unlock()
	out := meterSample{Seconds: now.Sub(since).Seconds(), Appends: c.appends, AppendErrors: c.appendErrors, Events: c.events, ReadPages: c.readPages}
	if out.Seconds > 0 {
		out.AppendsPerSec = float64(c.appends) / out.Seconds
		out.EventsPerSec = float64(c.events) / out.Seconds
		out.ReadsPerSec = float64(c.readPages) / out.Seconds
	}
	if ps != nil {
		out.P50, out.P90, out.P99 = &ps[0], &ps[1], &ps[2]
	}
	return out
}
