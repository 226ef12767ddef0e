package lab

import (
	"fmt"
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: 1 ns to 10 minutes.
const (
	lowest  = 1
	highest = int64(10 * time.Minute)
)

// FewSamples is the sample count below which a latency's p99 (and p99.9)
// is flagged: with fewer than 100 samples the p99 is the maximum.
const FewSamples = 100

// NewHistogram returns an HDR histogram of durations from 1 ns to 10
// minutes with three significant digits.
func NewHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(lowest, highest, 3) }

// Latency is the one shape every lab command reports a latency in:
// percentiles of Samples timed operations, in nanoseconds in JSON.
type Latency struct {
	Samples int64         `json:"samples"`
	P50     time.Duration `json:"p50_ns"`
	P90     time.Duration `json:"p90_ns"`
	P99     time.Duration `json:"p99_ns"`
	P999    time.Duration `json:"p999_ns"`
	Max     time.Duration `json:"max_ns"`
	Mean    time.Duration `json:"mean_ns"`
	// FewSamples is set below [FewSamples] samples: the p99 and p99.9 are
	// then the maximum, not a percentile.
	FewSamples bool `json:"few_samples"`
}

// LatencyOf summarizes a histogram; the zero Latency when it is empty.
func LatencyOf(h *hdrhistogram.Histogram) Latency {
	n := h.TotalCount()
	if n == 0 {
		return Latency{}
	}
	q := func(p float64) time.Duration { return time.Duration(h.ValueAtQuantile(p)) }
	return Latency{
		Samples: n, P50: q(50), P90: q(90), P99: q(99), P999: q(99.9),
		Max: time.Duration(h.Max()), Mean: time.Duration(math.Round(h.Mean())),
		FewSamples: n < FewSamples,
	}
}

// Cells returns the latency as table cells: p50, p90, p99, max and the
// sample count, the count marked when it is too small for a p99; without
// samples, a dash and the count.
func (l Latency) Cells() []string {
	if l.Samples == 0 {
		return []string{"-", "", "", "", "0"}
	}
	return []string{fmtDur(l.P50), fmtDur(l.P90), fmtDur(l.P99), fmtDur(l.Max), l.SamplesText()}
}

// SamplesText is the sample count with a mark when it is too few for a
// p99.
func (l Latency) SamplesText() string {
	s := GroupDigits(float64(l.Samples))
	if l.FewSamples && l.Samples > 0 {
		s += "*"
	}
	return s
}

// LatencyHead are the headings of Cells.
var LatencyHead = []string{"P50", "P90", "P99", "MAX", "N"}

// FewSamplesNote explains the mark of SamplesText.
const FewSamplesNote = "* fewer than 100 samples: the p99 is the maximum"

// String prints the latency on one line.
func (l Latency) String() string {
	if l.Samples == 0 {
		return "no samples"
	}
	s := fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s (%s samples)", fmtDur(l.P50), fmtDur(l.P90), fmtDur(l.P99), fmtDur(l.Max), GroupDigits(float64(l.Samples)))
	if l.FewSamples {
		s += "; too few samples for a p99: it is the maximum"
	}
	return s
}
