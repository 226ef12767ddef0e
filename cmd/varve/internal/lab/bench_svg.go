package lab

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// The charts of the HTML report are inline SVG drawn here, so the report
// is one file that renders with no network and no script.

// palette gives each store a colour, in store order.
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f"}

func storeColor(i int) string { return palette[i%len(palette)] }

// svg accumulates the elements of one chart.
type svg struct {
	b    strings.Builder
	w, h int
}

func newSVG(w, h int) *svg { return &svg{w: w, h: h} }

func (s *svg) add(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

func (s *svg) text(x, y float64, anchor, class, text string) {
	s.add(`<text x="%.1f" y="%.1f" text-anchor="%s" class="%s">%s</text>`, x, y, anchor, class, template.HTMLEscapeString(text))
}

func (s *svg) line(x1, y1, x2, y2 float64, class string) {
	s.add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="%s"/>`, x1, y1, x2, y2, class)
}

func (s *svg) html(title string) template.HTML {
	return template.HTML(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">%s</svg>`,
		s.w, s.h, s.w, s.h, template.HTMLEscapeString(title), s.b.String()))
}

// logAxis maps values in [lo, hi] (whole decades) onto [p0, p1].
type logAxis struct {
	lo, hi float64 // decades: log10 of the ends
	p0, p1 float64
}

func newLogAxis(min, max, p0, p1 float64) logAxis {
	if min <= 0 {
		min = 1
	}
	if max < min {
		max = min
	}
	lo, hi := math.Floor(math.Log10(min)), math.Ceil(math.Log10(max))
	if hi <= lo {
		hi = lo + 1
	}
	return logAxis{lo: lo, hi: hi, p0: p0, p1: p1}
}

func (a logAxis) pos(v float64) float64 {
	if v <= 0 {
		return a.p0
	}
	f := (math.Log10(v) - a.lo) / (a.hi - a.lo)
	return a.p0 + f*(a.p1-a.p0)
}

func (a logAxis) decades() []float64 {
	var out []float64
	for d := a.lo; d <= a.hi; d++ {
		out = append(out, math.Pow(10, d))
	}
	return out
}

// siRate formats a rate for an axis or label: 950, 12k, 3.4M.
func siRate(v float64) string {
	switch {
	case v >= 1e9:
		return trimZero(v/1e9) + "G"
	case v >= 1e6:
		return trimZero(v/1e6) + "M"
	case v >= 1e3:
		return trimZero(v/1e3) + "k"
	}
	return trimZero(v)
}

// seconds labels a time axis in seconds.
func seconds(v float64) string { return trimZero(v) + "s" }

func trimZero(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	s := fmt.Sprintf("%.2g", v)
	if strings.Contains(s, "e") {
		s = fmt.Sprintf("%.0f", v)
	}
	return s
}

// throughputChart draws a bar per store per workload on a log scale, with
// a tick at the store's baseline.
func throughputChart(rep *BenchReport) template.HTML {
	const (
		left, right, top = 170.0, 250.0, 34.0
		bar, gap         = 15.0, 12.0
		width            = 1100
	)
	lo, hi := math.Inf(1), 0.0
	type row struct {
		store int
		rate  float64
		base  float64
		label string
	}
	groups := make([][]row, len(rep.Workloads))
	for wi, wl := range rep.Workloads {
		for si, r := range rep.resultsOf(wl.Name) {
			if r.Ops == 0 {
				continue
			}
			rt := row{store: si, rate: r.Rate(wl.Unit), label: siRate(r.Rate(wl.Unit)) + " " + string(wl.Unit) + "/s"}
			if bl := rep.Stores[si].Baseline; bl != nil && bl.EventsPerSec > 0 && Writes(wl.Name) {
				rt.base = bl.EventsPerSec
				hi = max(hi, rt.base)
				lo = min(lo, rt.base)
			}
			if r.VsBaseline != nil {
				rt.label += " · " + fmtRatio(r.VsBaseline.Throughput) + " base"
			}
			lo, hi = min(lo, rt.rate), max(hi, rt.rate)
			groups[wi] = append(groups[wi], rt)
		}
	}
	h := top + 30
	for _, g := range groups {
		if len(g) > 0 {
			h += float64(len(g))*bar + gap
		}
	}
	s := newSVG(width, int(h))
	if hi == 0 {
		s.text(width/2, 20, "middle", "muted", "no results")
		return s.html("throughput")
	}
	ax := newLogAxis(lo, hi, left, width-right)
	for _, d := range ax.decades() {
		x := ax.pos(d)
		s.line(x, top-6, x, h-24, "grid")
		s.text(x, h-8, "middle", "tick", siRate(d))
	}
	s.text(left, 16, "start", "muted", "events/s (ops/s for mixed and stream workloads), log scale; | marks the store's raw write baseline")
	y := top
	for wi, g := range groups {
		if len(g) == 0 {
			continue
		}
		s.text(left-8, y+float64(len(g))*bar/2+4, "end", "label", rep.Workloads[wi].Name)
		for _, r := range g {
			x := ax.pos(r.rate)
			s.add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`,
				left, y+1, math.Max(x-left, 1), bar-2, storeColor(r.store), template.HTMLEscapeString(rep.Stores[r.store].Name), template.HTMLEscapeString(r.label))
			end := x
			if r.base > 0 {
				bx := ax.pos(r.base)
				s.line(bx, y, bx, y+bar, "base")
				end = max(end, bx)
			}
			s.text(end+6, y+bar-4, "start", "value", r.label)
			y += bar
		}
		y += gap
	}
	return s.html("throughput per workload and store")
}

var percentileNames = []string{"p50", "p90", "p99", "p99.9", "max"}

func percentiles(l Latency) []time.Duration {
	return []time.Duration{l.P50, l.P90, l.P99, l.P999, l.Max}
}

// latencyChart draws one workload's latency percentiles, a line per store.
func latencyChart(rep *BenchReport, wl BenchWorkload) template.HTML {
	const (
		width, height            = 265, 190
		left, right, top, bottom = 52.0, 10.0, 24.0, 24.0
	)
	s := newSVG(width, height)
	s.text(width/2, 14, "middle", "label", wl.Name)
	lo, hi := math.Inf(1), 0.0
	type line struct {
		store int
		ps    []time.Duration
	}
	var lines []line
	for si, r := range rep.resultsOf(wl.Name) {
		if r.Ops > 0 {
			ps := percentiles(r.Latency)
			for _, p := range ps {
				if p > 0 {
					lo, hi = min(lo, float64(p)), max(hi, float64(p))
				}
			}
			lines = append(lines, line{si, ps})
		}
	}
	if len(lines) == 0 {
		s.text(width/2, height/2, "middle", "muted", "not run")
		return s.html(wl.Name)
	}
	ay := s.durationAxis(lo, hi, left, right, top, bottom)
	step := (width - left - right) / float64(len(percentileNames)-1)
	for i, n := range percentileNames {
		s.text(left+float64(i)*step, height-8, "middle", "tick", n)
	}
	for _, l := range lines {
		var pts []string
		for i, p := range l.ps {
			x, y := left+float64(i)*step, ay.pos(float64(p))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			s.add(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s %s: %s</title></circle>`, x, y, storeColor(l.store),
				template.HTMLEscapeString(rep.Stores[l.store].Name), percentileNames[i], fmtDur(p))
		}
		s.add(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.8"/>`, strings.Join(pts, " "), storeColor(l.store))
	}
	return s.html(wl.Name + " latency percentiles")
}

// timelineChart draws one workload's per-interval p50 (dashed) and p99
// (solid) latency over the run, a pair of lines per store with a dot per
// interval, so that a run of one interval shows too.
func timelineChart(rep *BenchReport, wl BenchWorkload) template.HTML {
	const (
		width, height            = 540, 220
		left, right, top, bottom = 56.0, 12.0, 26.0, 30.0
	)
	s := newSVG(width, height)
	s.text(width/2, 15, "middle", "label", wl.Name+": latency per interval (p99 solid, p50 dashed)")
	lo, hi, tmax := math.Inf(1), 0.0, 0.0
	type series struct {
		store int
		pts   []Point
	}
	var ss []series
	for si, r := range rep.resultsOf(wl.Name) {
		var pts []Point
		for _, p := range r.Timeline {
			if p.Ops == 0 {
				continue
			}
			pts = append(pts, p)
			lo, hi = min(lo, float64(p.P50)), max(hi, float64(p.P99))
			tmax = max(tmax, p.At.Seconds())
		}
		if len(pts) > 0 {
			ss = append(ss, series{si, pts})
		}
	}
	if len(ss) == 0 || hi == 0 || tmax == 0 {
		return ""
	}
	ay := s.durationAxis(lo, hi, left, right, top, bottom)
	x := func(t time.Duration) float64 { return left + t.Seconds()/tmax*(width-left-right) }
	for _, t := range niceTicks(tmax) {
		px := left + t/tmax*(width-left-right)
		s.line(px, top, px, height-bottom, "grid")
		s.text(px, height-12, "middle", "tick", seconds(t))
	}
	for _, se := range ss {
		var p50, p99 []string
		c := storeColor(se.store)
		name := template.HTMLEscapeString(rep.Stores[se.store].Name)
		for _, p := range se.pts {
			px, y50, y99 := x(p.At), ay.pos(float64(p.P50)), ay.pos(float64(p.P99))
			p50 = append(p50, fmt.Sprintf("%.1f,%.1f", px, y50))
			p99 = append(p99, fmt.Sprintf("%.1f,%.1f", px, y99))
			s.add(`<circle cx="%.1f" cy="%.1f" r="2.2" fill="%s"><title>%s at %s: p99 %s</title></circle>`, px, y99, c, name, fmtDur(p.At), fmtDur(p.P99))
			s.add(`<circle cx="%.1f" cy="%.1f" r="1.8" fill="#fff" stroke="%s"><title>%s at %s: p50 %s</title></circle>`, px, y50, c, name, fmtDur(p.At), fmtDur(p.P50))
		}
		if len(se.pts) > 1 {
			s.add(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"><title>%s p99</title></polyline>`, strings.Join(p99, " "), c, name)
			s.add(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.2" stroke-dasharray="4 3"><title>%s p50</title></polyline>`, strings.Join(p50, " "), c, name)
		}
	}
	return s.html(wl.Name + " latency over time")
}

// durationAxis draws the grid of a log y axis of durations from lo to hi,
// a line a decade, between the margins of the chart, and returns the axis.
func (s *svg) durationAxis(lo, hi, left, right, top, bottom float64) logAxis {
	ay := newLogAxis(lo, hi, float64(s.h)-bottom, top)
	for _, d := range ay.decades() {
		y := ay.pos(d)
		s.line(left, y, float64(s.w)-right, y, "grid")
		s.text(left-4, y+4, "end", "tick", time.Duration(d).String())
	}
	return ay
}

// niceTicks returns about five round tick values in (0, max].
func niceTicks(max float64) []float64 {
	if max <= 0 {
		return nil
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for t := step; t <= max*1.0001; t += step {
		out = append(out, t)
	}
	return out
}
