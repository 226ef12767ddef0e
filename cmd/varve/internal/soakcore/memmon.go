package soakcore

import (
	"bufio"
	"context"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// MemSample is one reading of the process's memory.
type MemSample struct {
	At          time.Duration `json:"at_ns"` // since the monitor started
	HeapAlloc   uint64        `json:"heap_alloc"`
	HeapLive    uint64        `json:"heap_live"` // live heap as of the last GC
	HeapObjects uint64        `json:"heap_objects"`
	TotalAlloc  uint64        `json:"total_alloc"`
	Sys         uint64        `json:"sys"`
	NumGC       uint32        `json:"num_gc"`
	PauseTotal  time.Duration `json:"gc_pause_total_ns"`
	Goroutines  int           `json:"goroutines"`
	RSS         uint64        `json:"rss"`
	Ops         int64         `json:"ops"` // operations done so far
}

// ReadMem takes a sample now.
func ReadMem() MemSample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	s := MemSample{
		HeapAlloc: ms.HeapAlloc, HeapObjects: ms.HeapObjects, TotalAlloc: ms.TotalAlloc, Sys: ms.Sys,
		NumGC: ms.NumGC, PauseTotal: time.Duration(ms.PauseTotalNs), Goroutines: runtime.NumGoroutine(), RSS: rss(),
	}
	if live[0].Value.Kind() == metrics.KindUint64 {
		s.HeapLive = live[0].Value.Uint64()
	}
	return s
}

// rss reads the resident set size from /proc/self/status; 0 where there is none.
func rss() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// Monitor samples memory every interval until ctx ends, calling each with
// every sample but the last; ops reports the operations done so far. It
// returns every sample taken, the first at the start and the last at the
// moment ctx ended.
func Monitor(ctx context.Context, interval time.Duration, ops func() int64, each func(MemSample)) []MemSample {
	start := time.Now()
	take := func() MemSample {
		s := ReadMem()
		s.At = time.Since(start)
		if ops != nil {
			s.Ops = ops()
		}
		return s
	}
	samples := []MemSample{take()}
	if each != nil {
		each(samples[0])
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return append(samples, take())
		case <-t.C:
			if ctx.Err() != nil {
				// Both were ready (each may have ended the run): a tick
				// after the end is not a sample of the run.
				return append(samples, take())
			}
			s := take()
			samples = append(samples, s)
			if each != nil {
				each(s)
			}
		}
	}
}

// Trend is the fitted growth of one memory figure over the second half of a
// run.
type Trend struct {
	Name        string  `json:"name"`
	Mean        float64 `json:"mean_bytes"`
	SlopePerMin float64 `json:"slope_bytes_per_min"`
	// StdErr is the slope's standard error and SlopeLow the lower end of
	// its two-sided 95% interval (SlopePerMin - 2.306 StdErr), both in
	// bytes per minute; see Judge.
	StdErr        float64 `json:"slope_stderr_bytes_per_min"`
	SlopeLow      float64 `json:"slope_low_bytes_per_min"`
	PctPer10Min   float64 `json:"pct_of_mean_per_10min"`
	ThresholdPct  float64 `json:"threshold_pct_per_10min"`
	MinSlope      float64 `json:"min_slope_bytes_per_min"`
	ExceedsThresh bool    `json:"flagged"`
}

// JudgedBatches is how many consecutive batches of samples Judge cuts the
// second half of a run into; it fits its line through the batches' means.
const JudgedBatches = 10

// tCrit is Student's t with JudgedBatches-2 = 8 degrees of freedom at
// 97.5%: the slope's two-sided 95% interval is +-tCrit standard errors.
const tCrit = 2.306

// BatchSlope fits a least-squares line through the means of n consecutive
// batches of (x, y) (n at most len(xs)) and returns its slope and the
// slope's standard error from the batch means' residuals (0 for fewer than
// three batches). Samples taken a second apart are not independent (a live
// heap saws with the collector and the workload), so the residuals of the
// samples themselves understate the error; batch means are nearly
// independent once a batch spans a few cycles (the method of batch
// means).
func BatchSlope(xs, ys []float64, n int) (slope, stderr float64) {
	n = min(n, len(xs))
	if n < 2 {
		return 0, 0
	}
	bx, by := make([]float64, n), make([]float64, n)
	var mx, my float64
	for b := range n {
		lo, hi := b*len(xs)/n, (b+1)*len(xs)/n
		for i := lo; i < hi; i++ {
			bx[b] += xs[i]
			by[b] += ys[i]
		}
		bx[b] /= float64(hi - lo)
		by[b] /= float64(hi - lo)
		mx += bx[b] / float64(n)
		my += by[b] / float64(n)
	}
	var sxx, sxy float64
	for b := range n {
		sxx += (bx[b] - mx) * (bx[b] - mx)
		sxy += (bx[b] - mx) * (by[b] - my)
	}
	if sxx == 0 {
		return 0, 0
	}
	slope = sxy / sxx
	if n < 3 {
		return slope, 0
	}
	var sse float64
	for b := range n {
		r := by[b] - my - slope*(bx[b]-mx)
		sse += r * r
	}
	return slope, math.Sqrt(sse / float64(n-2) / sxx)
}

// Verdict statuses.
const (
	Flat         = "flat"
	Growing      = "growing"
	Insufficient = "insufficient data"
)

// MinJudgedSamples is the least number of samples in the judged half of a
// run.
const MinJudgedSamples = 10

// Verdict says whether memory stayed flat.
type Verdict struct {
	// Status is flat, growing or insufficient data; Flat is Status == flat.
	Status           string        `json:"status"`
	Flat             bool          `json:"flat"`
	Trends           []Trend       `json:"trends"`
	GoroutinesMid    int           `json:"goroutines_mid"`
	GoroutinesEnd    int           `json:"goroutines_end"`
	GoroutineGrowth  bool          `json:"goroutine_growth"`
	SamplesEvaluated int           `json:"samples_evaluated"`
	Span             time.Duration `json:"span_ns"`
	MinSpan          time.Duration `json:"min_span_ns"`
}

// Judge fits the live heap and the RSS over the second half of the samples
// and flags a figure only when its growth is more than noise: the lower end
// of the slope's 95% interval, projected over 10 minutes, must exceed
// thresholdPct percent of the figure's mean and minSlope bytes per minute.
// The slope comes from the means of JudgedBatches consecutive batches of
// samples (BatchSlope), its standard error is the larger of the batch
// means' and the samples' own: the first holds up when samples are
// correlated (a sawtooth), the second when ten batches happen to line up
// (eight degrees of freedom make a noisy estimate). A live heap that saws
// between 8 and 14 MB with the workload gives slopes of +-100 KiB/min over
// 5 minutes either way, far above a 1%-per-10-minutes bar on a 10 MB heap,
// so the point slope alone judged leak-free runs growing by chance; a
// steady leak has a tight interval and is flagged. The floor keeps a tiny
// heap's jitter from counting as growth: 1% of a 1 MiB heap is noise. The
// live heap (as of the last GC) is used instead of the allocated heap,
// which saws up and down between collections. Goroutines growing by more
// than 2 between the middle and the end of the run are flagged too. A
// figure that is zero throughout (the RSS where the platform has none, as
// in a browser) is not judged. A second half of fewer than
// MinJudgedSamples samples, or spanning less than minSpan, gives no
// verdict: "insufficient data".
func Judge(samples []MemSample, thresholdPct, minSlope float64, minSpan time.Duration) Verdict {
	half := samples[len(samples)/2:]
	v := Verdict{SamplesEvaluated: len(half), MinSpan: minSpan}
	if len(half) > 0 {
		v.Span = half[len(half)-1].At - half[0].At
	}
	if len(half) < MinJudgedSamples || v.Span < minSpan {
		v.Status = Insufficient
		return v
	}
	v.Status = Flat
	xs := make([]float64, len(half))
	for i, s := range half {
		xs[i] = s.At.Minutes()
	}
	for _, fig := range []struct {
		name string
		get  func(MemSample) uint64
	}{{"heap_live", func(s MemSample) uint64 { return s.HeapLive }}, {"rss", func(s MemSample) uint64 { return s.RSS }}} {
		ys := make([]float64, len(half))
		var sum float64
		for i, s := range half {
			ys[i] = float64(fig.get(s))
			sum += ys[i]
		}
		if sum == 0 {
			// The platform has no such figure (no RSS in a browser).
			continue
		}
		t := Trend{Name: fig.name, Mean: sum / float64(len(ys)), ThresholdPct: thresholdPct, MinSlope: minSlope}
		t.SlopePerMin, t.StdErr = BatchSlope(xs, ys, JudgedBatches)
		_, perSample := BatchSlope(xs, ys, len(xs))
		t.StdErr = max(t.StdErr, perSample)
		t.SlopeLow = t.SlopePerMin - tCrit*t.StdErr
		if t.Mean > 0 {
			t.PctPer10Min = 100 * t.SlopePerMin * 10 / t.Mean
		}
		t.ExceedsThresh = t.Mean > 0 && 100*t.SlopeLow*10/t.Mean > thresholdPct && t.SlopeLow > minSlope
		if t.ExceedsThresh {
			v.Status = Growing
		}
		v.Trends = append(v.Trends, t)
	}
	v.GoroutinesMid, v.GoroutinesEnd = half[0].Goroutines, half[len(half)-1].Goroutines
	if v.GoroutinesEnd > v.GoroutinesMid+2 {
		v.GoroutineGrowth, v.Status = true, Growing
	}
	v.Flat = v.Status == Flat
	return v
}
