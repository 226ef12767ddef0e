package soakweb

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
	"github.com/varve-go/varve/cmd/varve/internal/soakcore"
)

// Result is the part of the module's result the report takes.
type Result struct {
	Mode        string          `json:"mode"`
	StopReason  string          `json:"stop_reason"`
	ElapsedMS   int64           `json:"elapsed_ms"`
	Counts      soakcore.Counts `json:"counts"`
	FirstError  string          `json:"first_error"`
	MemoryLimit int64           `json:"memory_limit"`
	Error       string          `json:"error"`
	Latency     struct {
		Samples int64   `json:"samples"`
		P50     int64   `json:"p50_ns"`
		P90     int64   `json:"p90_ns"`
		P99     int64   `json:"p99_ns"`
		P999    int64   `json:"p999_ns"`
		Max     int64   `json:"max_ns"`
		Mean    float64 `json:"mean_ns"`
	} `json:"latency"`
	Verdict soakcore.Verdict `json:"verdict"`
}

// End is what the page posts when the module exited during a run.
type End struct {
	ExitCode int    `json:"exit_code"`
	Fatal    string `json:"fatal"`
}

// Ending names how a browser run ended, for reports.
const (
	EndedAllocation = "allocation failure in the module"
	EndedTab        = "the tab stopped reporting"
)

var browserName = regexp.MustCompile(`(HeadlessChrome|Chromium|Edg|Chrome|Firefox|Version)/[0-9.]+`)

// Report builds the native soak's report from what the page posted: every
// sample, the result when the run ended in the module, the exit when the
// module died, or neither when the tab stopped reporting. The run's
// settings and the verdict's thresholds are those the page started it
// with, cfg's when it posted none; the verdict is drawn from
// the posted samples with the native soak's [lab.Judge].
func (s *Server) Report(cfg lab.SoakConfig) (lab.SoakReport, error) {
	s.mu.Lock()
	rec := make([]lab.RecordedSample, 0, len(s.samples))
	var limit int64
	for _, sm := range s.samples {
		rec = append(rec, sm.RecordedSample)
		limit = sm.MemoryLimit
	}
	result, end, agent, start := s.result, s.end, s.agent, s.start
	s.mu.Unlock()
	if start != nil {
		// The page's fields may differ from the command line's.
		var st struct {
			Mode         string  `json:"mode"`
			DurationMS   int64   `json:"duration_ms"`
			PruneAbove   int     `json:"prune_above"`
			Workers      int     `json:"workers"`
			Rate         int     `json:"rate"`
			ThresholdPct float64 `json:"threshold_pct"`
			MinSlope     float64 `json:"min_slope_bytes_per_min"`
			MinSpanMS    int64   `json:"min_span_ms"`
		}
		if err := json.Unmarshal(start, &st); err != nil {
			return lab.SoakReport{}, fmt.Errorf("the page's start: %w", err)
		}
		cfg.Mode, cfg.Duration, cfg.PruneAbove, cfg.Workers, cfg.Rate = st.Mode, time.Duration(st.DurationMS)*time.Millisecond, st.PruneAbove, st.Workers, st.Rate
		cfg.ThresholdPct, cfg.MinSlope, cfg.MinSpan = st.ThresholdPct, st.MinSlope, time.Duration(st.MinSpanMS)*time.Millisecond
	}
	if len(rec) == 0 && result == nil {
		return lab.SoakReport{}, ErrNothingYet
	}
	rep := lab.SoakReport{Store: "memory (WebAssembly)", Mode: cfg.Mode, Duration: cfg.Duration, Rate: cfg.Rate, Workers: cfg.Workers,
		MemoryLimit: limit, PruneAbove: cfg.PruneAbove, Machine: lab.Machine()}
	switch {
	case result != nil:
		var r Result
		if err := json.Unmarshal(result, &r); err != nil {
			return rep, fmt.Errorf("the page's result: %w", err)
		}
		if r.Error != "" {
			return rep, fmt.Errorf("the module: %s", r.Error)
		}
		n := r.Counts
		rep.Ops, rep.Conflicts, rep.Errors, rep.Appended, rep.CaughtUp, rep.Pruned, rep.LiveEvents, rep.StreamsReads =
			n.Ops, n.Conflicts, n.Errors, n.Appended, n.CaughtUp, n.Pruned, n.LiveEvents, n.Reads
		rep.Elapsed, rep.StopReason, rep.FirstError, rep.MemoryLimit = time.Duration(r.ElapsedMS)*time.Millisecond, r.StopReason, r.FirstError, r.MemoryLimit
		l := r.Latency
		rep.Latency = lab.Latency{Samples: l.Samples, P50: time.Duration(l.P50), P90: time.Duration(l.P90), P99: time.Duration(l.P99),
			P999: time.Duration(l.P999), Max: time.Duration(l.Max), Mean: time.Duration(l.Mean), FewSamples: l.Samples < lab.FewSamples}
	case end != nil:
		var e End
		if err := json.Unmarshal(end, &e); err != nil {
			return rep, fmt.Errorf("the page's end: %w", err)
		}
		rep.Ended = EndedAllocation
		rep.StopReason = fmt.Sprintf("the module exited with code %d", e.ExitCode)
		if e.Fatal != "" {
			rep.StopReason += ": " + e.Fatal
		}
	default:
		rep.Ended = EndedTab
		rep.StopReason = "no result and no exit from the page: the tab died, or was closed, after the last sample"
	}
	env := "browser (WebAssembly, memory backend"
	if b := browserName.FindString(agent); b != "" {
		env = "browser (WebAssembly in " + b + ", memory backend"
	}
	if rep.MemoryLimit == math.MaxInt64 {
		rep.MemoryLimit = 0 // the runtime's default: no limit
	}
	if rep.MemoryLimit > 0 {
		env += ", debug.SetMemoryLimit " + lab.MiB(uint64(rep.MemoryLimit))
	} else {
		env += ", no memory limit"
	}
	rep.Environment = env + ")"
	return lab.SoakFromRecord(rep, rec, cfg.ThresholdPct, cfg.MinSlope, cfg.MinSpan), nil
}
