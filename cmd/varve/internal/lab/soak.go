package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/cmd/varve/internal/soakcore"
	"github.com/varve-go/varve/cmd/varve/internal/termtext"
)

// Soak modes.
const (
	// Sustained prunes the oldest streams above a threshold so the data set
	// reaches a steady state; memory must stay flat.
	Sustained = soakcore.Sustained
	// Discovery never prunes and runs until the live heap reaches 90% of the
	// memory limit (or the duration ends), reporting where it stopped.
	Discovery = soakcore.Discovery
)

// The memory monitor and the verdict live in package soakcore, which builds
// for js/wasm; the lab's reports use them under these names.
type (
	MemSample = soakcore.MemSample
	Trend     = soakcore.Trend
	Verdict   = soakcore.Verdict
)

// Verdict statuses.
const (
	Flat         = soakcore.Flat
	Growing      = soakcore.Growing
	Insufficient = soakcore.Insufficient
)

// MinJudgedSamples is the least number of samples in the judged half of a
// run.
const MinJudgedSamples = soakcore.MinJudgedSamples

// Judge is [soakcore.Judge].
func Judge(samples []MemSample, thresholdPct, minSlope float64, minSpan time.Duration) Verdict {
	return soakcore.Judge(samples, thresholdPct, minSlope, minSpan)
}

// MiB formats bytes in MiB.
func MiB(b uint64) string { return soakcore.MiB(b) }

// SoakConfig configures a soak run. Every count must be positive; nothing
// is replaced by a default.
type SoakConfig struct {
	// Store is the URL of the store to open, Label its name in reports.
	Store, Label string
	// Environment names where the soak runs in reports: "native" when
	// empty, or as the caller says (a capped child process).
	Environment string
	Mode        string
	Duration    time.Duration
	MemoryLimit int64 // bytes, set with debug.SetMemoryLimit; 0 leaves it alone
	PruneAbove  int   // live events above which the oldest streams are deleted
	Workers     int
	// Rate caps the commands per second over all workers; 0 runs flat out.
	Rate       int
	Aggregates int           // accounts the commands pick from
	Interval   time.Duration // memory sampling interval
	// ThresholdPct flags a memory figure whose slope over the second half of
	// the run, projected over 10 minutes, exceeds this percent of its mean.
	ThresholdPct float64
	// MinSlope is the growth in bytes per minute below which nothing is
	// flagged, whatever its share of the mean.
	MinSlope float64
	// MinSpan is the least time the judged second half of the run must
	// cover for a verdict; shorter runs are "insufficient data". 0 means
	// DefaultMinSpan.
	MinSpan  time.Duration
	Progress io.Writer
	// Record, when set, gets every sample with the counts of that moment
	// as a line of JSON ([RecordedSample]): a capped child writes them
	// where its parent reads them after a kill.
	Record io.Writer

	onOp func() // tests use it to leak on purpose
}

// DefaultMinSpan is the least span of samples a verdict is drawn from: a
// slope projected over 10 minutes from seconds of samples is noise.
const DefaultMinSpan = time.Minute

// SoakReport is the result of a soak run.
type SoakReport struct {
	Store       string        `json:"store"`
	Environment string        `json:"environment"`
	Mode        string        `json:"mode"`
	Duration    time.Duration `json:"duration_ns"`
	Rate        int           `json:"rate"`
	Workers     int           `json:"workers"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	// Latency is the latency of one command (load, decide, save), waits
	// for the rate cap excluded.
	Latency      Latency     `json:"latency"`
	MemoryLimit  int64       `json:"memory_limit"`
	PruneAbove   int         `json:"prune_above"`
	Machine      MachineInfo `json:"machine"`
	Ops          int64       `json:"ops"`
	Conflicts    int64       `json:"conflicts"`
	Errors       int64       `json:"errors"`
	FirstError   string      `json:"first_error,omitempty"`
	Appended     int64       `json:"events_appended"`
	CaughtUp     int64       `json:"events_caught_up"`
	Pruned       int64       `json:"streams_pruned"`
	LiveEvents   int64       `json:"live_events_at_end"`
	StopReason   string      `json:"stop_reason"`
	Samples      []MemSample `json:"samples"`
	Verdict      Verdict     `json:"verdict"`
	StreamsReads int64       `json:"stream_reads"`
	Interrupted  bool        `json:"interrupted"`
	// Ended says how the process (or the browser's module) ended when it
	// did not end the run itself: an out-of-memory kill, an allocation
	// failure, a tab that stopped reporting; empty when the run ended.
	Ended string `json:"ended,omitempty"`
	// Ceiling is the last figures known in discovery mode: where the run
	// stopped, or where it was when its process died.
	Ceiling *Ceiling `json:"ceiling,omitempty"`
}

// Ceiling is the last sample of a discovery run with the events it held.
type Ceiling struct {
	At         time.Duration `json:"at_ns"`
	HeapLive   uint64        `json:"heap_live"`
	HeapAlloc  uint64        `json:"heap_alloc"`
	Sys        uint64        `json:"sys"`
	RSS        uint64        `json:"rss"`
	LiveEvents int64         `json:"live_events"`
	// Rate is the commands per second over the last sampling interval.
	Rate float64 `json:"rate"`
}

// RecordedSample is a sample with the counts of its moment, as a capped
// child's record and the browser page post them.
type RecordedSample struct {
	Mem    MemSample       `json:"mem"`
	Counts soakcore.Counts `json:"counts"`
}

// ceilingAt returns the ceiling at the last of samples, live holding the
// events there.
func ceilingAt(samples []MemSample, live int64) *Ceiling {
	if len(samples) == 0 {
		return nil
	}
	last := samples[len(samples)-1]
	c := &Ceiling{At: last.At, HeapLive: last.HeapLive, HeapAlloc: last.HeapAlloc, Sys: last.Sys, RSS: last.RSS, LiveEvents: live}
	if n := len(samples); n > 1 {
		if d := last.At - samples[n-2].At; d > 0 {
			c.Rate = float64(last.Ops-samples[n-2].Ops) / d.Seconds()
		}
	}
	return c
}

// SoakFromRecord completes rep, whose identity (store, environment, mode,
// limits) the caller set, from samples recorded by a process that may
// have died since: the samples in time order, the counts of the last one,
// the ceiling in discovery mode and the verdict over them. Elapsed and the
// counts are only taken from the record when rep has none.
func SoakFromRecord(rep SoakReport, rec []RecordedSample, thresholdPct, minSlope float64, minSpan time.Duration) SoakReport {
	sort.SliceStable(rec, func(i, j int) bool { return rec[i].Mem.At < rec[j].Mem.At })
	rep.Samples = rep.Samples[:0]
	for i, r := range rec {
		if i > 0 && r.Mem.At == rec[i-1].Mem.At {
			continue
		}
		rep.Samples = append(rep.Samples, r.Mem)
	}
	if len(rec) > 0 {
		last := rec[len(rec)-1]
		if rep.Ops == 0 {
			n := last.Counts
			rep.Ops, rep.Conflicts, rep.Errors, rep.Appended, rep.CaughtUp, rep.Pruned, rep.LiveEvents, rep.StreamsReads =
				n.Ops, n.Conflicts, n.Errors, n.Appended, n.CaughtUp, n.Pruned, n.LiveEvents, n.Reads
		}
		if rep.Elapsed == 0 {
			rep.Elapsed = last.Mem.At
		}
	}
	if rep.Mode == Discovery {
		rep.Ceiling = ceilingAt(rep.Samples, rep.LiveEvents)
	}
	if minSpan == 0 {
		minSpan = DefaultMinSpan
	}
	rep.Verdict = Judge(rep.Samples, thresholdPct, minSlope, minSpan)
	return rep
}

// ReadRecord reads the lines [SoakConfig.Record] wrote; a torn last line
// (the writer was killed mid-write) is dropped.
func ReadRecord(r io.Reader) ([]RecordedSample, error) {
	var rec []RecordedSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var s RecordedSample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			continue
		}
		rec = append(rec, s)
	}
	return rec, sc.Err()
}

func (c *SoakConfig) core() soakcore.Config {
	cfg := soakcore.Config{Mode: c.Mode, Duration: c.Duration, MemoryLimit: c.MemoryLimit, PruneAbove: c.PruneAbove,
		Workers: c.Workers, Rate: c.Rate, Aggregates: c.Aggregates, Interval: c.Interval, OnOp: c.onOp}
	var lastOps int64
	if c.Progress != nil || c.Record != nil {
		enc := json.NewEncoder(io.Discard)
		if c.Record != nil {
			enc = json.NewEncoder(c.Record)
		}
		cfg.Sample = func(m MemSample, n soakcore.Counts) {
			if c.Record != nil {
				_ = enc.Encode(RecordedSample{Mem: m, Counts: n})
			}
			if c.Progress != nil {
				printSample(c.Progress, m, c.Interval, n, lastOps)
				lastOps = m.Ops
			}
		}
	}
	return cfg
}

func (c *SoakConfig) validate() error {
	if err := c.core().Validate(); err != nil {
		return err
	}
	if c.ThresholdPct < 0 || c.MinSlope < 0 || c.MinSpan < 0 {
		return fmt.Errorf("soak: negative threshold, min-slope or min-span: %w", varve.ErrInvalidArgument)
	}
	if c.MinSpan == 0 {
		c.MinSpan = DefaultMinSpan
	}
	return nil
}

// RunSoak runs a sustained workload (commands on accounts: load, modify,
// save; stream reads; a $all follower; pruning in sustained mode) while a
// monitor samples memory, and judges whether memory stayed flat. The
// workload is [soakcore.Run] on the store cfg.Store names.
func RunSoak(ctx context.Context, cfg SoakConfig) (SoakReport, error) {
	rep := SoakReport{Store: cfg.Label, Mode: cfg.Mode, Duration: cfg.Duration, Rate: cfg.Rate, Workers: cfg.Workers,
		MemoryLimit: cfg.MemoryLimit, PruneAbove: cfg.PruneAbove, Machine: Machine(), Environment: cfg.Environment}
	if rep.Store == "" {
		rep.Store = Redact(cfg.Store)
	}
	if rep.Environment == "" {
		rep.Environment = "native"
	}
	if err := cfg.validate(); err != nil {
		return rep, err
	}
	if cfg.MemoryLimit > 0 {
		// Set before the store opens, as the run sets it again.
		old := debug.SetMemoryLimit(cfg.MemoryLimit)
		defer debug.SetMemoryLimit(old)
	}
	s, err := Open(ctx, cfg.Store)
	if err != nil {
		return rep, err
	}
	defer s.Close()
	res, runErr := soakcore.Run(ctx, s, cfg.core())
	rep.Elapsed, rep.StopReason, rep.Interrupted, rep.Samples = res.Elapsed, res.StopReason, res.Interrupted, res.Samples
	rep.Ops, rep.Conflicts, rep.Errors = res.Ops, res.Conflicts, res.Errors
	rep.Appended, rep.CaughtUp, rep.Pruned, rep.StreamsReads, rep.LiveEvents = res.Appended, res.CaughtUp, res.Pruned, res.Reads, res.LiveEvents
	if res.FirstError != "" {
		rep.FirstError = Scrub(res.FirstError)
	}
	if res.Latency != nil {
		rep.Latency = LatencyOf(res.Latency)
	}
	rep.Verdict = Judge(rep.Samples, cfg.ThresholdPct, cfg.MinSlope, cfg.MinSpan)
	if cfg.Mode == Discovery {
		rep.Ceiling = ceilingAt(rep.Samples, rep.LiveEvents)
	}
	return rep, runErr
}

// SoakDetail is what a soak row holds beyond the shared fields.
type SoakDetail struct {
	Mode         string `json:"mode"`
	Conflicts    int64  `json:"conflicts"`
	Appended     int64  `json:"events_appended"`
	CaughtUp     int64  `json:"events_caught_up"`
	Pruned       int64  `json:"streams_pruned"`
	LiveEvents   int64  `json:"live_events_at_end"`
	StreamsReads int64  `json:"stream_reads"`
	StopReason   string `json:"stop_reason"`
	Verdict      string `json:"verdict"`
}

// Row returns the run's commands as a row.
func (rep SoakReport) Row() Row {
	stopped := "duration"
	switch {
	case rep.Interrupted:
		stopped = "interrupted"
	case rep.Ended != "":
		stopped = rep.Ended
	case rep.StopReason != "duration reached":
		stopped = "memory limit"
	}
	row := Row{Store: rep.Store, Name: "commands", Unit: "commands", Count: rep.Ops, Elapsed: rep.Elapsed, Latency: rep.Latency,
		Errors: rep.Errors, Stopped: stopped, Error: rep.FirstError,
		Detail: SoakDetail{Mode: rep.Mode, Conflicts: rep.Conflicts, Appended: rep.Appended, CaughtUp: rep.CaughtUp, Pruned: rep.Pruned,
			LiveEvents: rep.LiveEvents, StreamsReads: rep.StreamsReads, StopReason: rep.StopReason, Verdict: rep.Verdict.Status}}
	if s := rep.Elapsed.Seconds(); s > 0 {
		row.Rate = float64(rep.Ops) / s
	}
	return row
}

// SoakDetails is what soak's envelope holds beyond its row.
type SoakDetails struct {
	Environment string      `json:"environment"`
	Ended       string      `json:"ended,omitempty"`
	Ceiling     *Ceiling    `json:"ceiling,omitempty"`
	MemoryLimit int64       `json:"memory_limit"`
	PruneAbove  int         `json:"prune_above"`
	Verdict     Verdict     `json:"verdict"`
	Samples     []MemSample `json:"samples"`
}

func printSample(w io.Writer, m MemSample, interval time.Duration, n soakcore.Counts, lastOps int64) {
	fmt.Fprintf(w, "%7s | %8.0f ops/s | heap %9s (live %9s) | rss %9s | %3d goroutines | gc %5d | errors %d\n",
		m.At.Round(time.Second), float64(m.Ops-lastOps)/interval.Seconds(),
		MiB(m.HeapAlloc), MiB(m.HeapLive), MiB(m.RSS), m.Goroutines, m.NumGC, n.Errors)
}

// PrintSoak writes the final table (memory, GC, goroutines) and the
// verdict.
func PrintSoak(w io.Writer, rep SoakReport) error {
	if len(rep.Samples) == 0 {
		_, err := fmt.Fprintf(w, "soak on %s: no samples (stopped: %s)\n", rep.Store, rep.StopReason)
		return err
	}
	first, last := rep.Samples[0], rep.Samples[len(rep.Samples)-1]
	secs := max(last.At.Seconds(), 1e-9)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Store\t%s (%s mode)\n", rep.Store, rep.Mode)
	fmt.Fprintf(tw, "Environment\t%s\n", rep.Environment)
	fmt.Fprintf(tw, "Run\t%s, stopped: %s\n", last.At.Round(time.Millisecond), rep.StopReason)
	if rep.Ended != "" {
		fmt.Fprintf(tw, "Ended\t%s\n", rep.Ended)
	}
	if c := rep.Ceiling; c != nil {
		fmt.Fprintf(tw, "Ceiling\tlive heap %s (heap %s, from the system %s) holding %d events at %.0f ops/s, %s in\n",
			MiB(c.HeapLive), MiB(c.HeapAlloc), MiB(c.Sys), c.LiveEvents, c.Rate, c.At.Round(time.Millisecond))
	}
	fmt.Fprintf(tw, "Commands\t%d (%.0f ops/s), %d conflicts, %d errors\n", rep.Ops, float64(rep.Ops)/secs, rep.Conflicts, rep.Errors)
	fmt.Fprintf(tw, "Latency\t%s\n", rep.Latency)
	fmt.Fprintf(tw, "Events\t%d appended, %d caught up by the $all follower, %d live at the end, %d streams pruned\n", rep.Appended, rep.CaughtUp, rep.LiveEvents, rep.Pruned)
	fmt.Fprintf(tw, "Final Alloc\t%s (live heap %s)\n", MiB(last.HeapAlloc), MiB(last.HeapLive))
	fmt.Fprintf(tw, "Total Alloc\t%s (%.1f MiB/s)\n", MiB(last.TotalAlloc-first.TotalAlloc), float64(last.TotalAlloc-first.TotalAlloc)/(1<<20)/secs)
	fmt.Fprintf(tw, "Heap Objects\t%d\n", last.HeapObjects)
	fmt.Fprintf(tw, "GC Cycles\t%d (pause total %s)\n", last.NumGC-first.NumGC, (last.PauseTotal - first.PauseTotal).Round(time.Microsecond))
	if last.RSS > 0 {
		fmt.Fprintf(tw, "RSS\t%s (start %s)\n", MiB(last.RSS), MiB(first.RSS))
	} else {
		fmt.Fprintf(tw, "Sys\t%s from the system (start %s); no RSS here\n", MiB(last.Sys), MiB(first.Sys))
	}
	fmt.Fprintf(tw, "Goroutines\t%d (start %d)\n", last.Goroutines, first.Goroutines)
	if rep.FirstError != "" {
		fmt.Fprintf(tw, "First error\t%s\n", termtext.Escape(rep.FirstError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	v := rep.Verdict
	if v.Status == Insufficient {
		_, err := fmt.Fprintf(w, "verdict: INSUFFICIENT DATA: the second half of the run holds %d samples over %v; a verdict needs at least %d over %v (run longer with --duration)\n",
			v.SamplesEvaluated, v.Span.Round(time.Millisecond), MinJudgedSamples, v.MinSpan)
		return err
	}
	for _, t := range v.Trends {
		flag := "ok"
		if t.ExceedsThresh {
			flag = "GROWING"
		}
		fmt.Fprintf(w, "trend %-9s mean %s, slope %+.1f KiB/min (95%%: %+.1f to %+.1f) = %+.2f%% of mean per 10 min (threshold %.2f%%, for the interval's lower end): %s\n",
			t.Name, MiB(uint64(t.Mean)), t.SlopePerMin/1024, t.SlopeLow/1024, (2*t.SlopePerMin-t.SlopeLow)/1024, t.PctPer10Min, t.ThresholdPct, flag)
	}
	verdict := "FLAT: no growth above the threshold beyond the noise of the second half of the run"
	if v.Status == Growing {
		verdict = "GROWING: see the trends above"
		if v.GoroutineGrowth {
			verdict += fmt.Sprintf("; goroutines grew from %d to %d", v.GoroutinesMid, v.GoroutinesEnd)
		}
		if rep.Mode == Discovery {
			verdict += " (as a discovery run does: it never prunes; not a failure)"
		}
	}
	_, err := fmt.Fprintln(w, "verdict:", verdict)
	return err
}
