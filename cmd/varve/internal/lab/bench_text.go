package lab

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/varve-go/varve/cmd/varve/internal/termtext"
	"github.com/varve-go/varve/internal/workload"
)

// unsteady is the baseline spread above which the report warns.
const unsteady = 1.5

// PrintBench writes a report as text: a header, the baselines and one
// aligned table per workload with a row per store.
func PrintBench(w io.Writer, rep *BenchReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "varve bench, %s, varve %s\n", rep.Started.UTC().Format("2006-01-02 15:04 MST"), rep.Varve)
	fmt.Fprintf(&b, "machine: %s, %d cores, GOMAXPROCS %d, %s %s/%s\n", rep.Machine.CPU, rep.Machine.Cores, rep.Machine.GOMAXPROCS,
		rep.Machine.GoVersion, rep.Machine.OS, rep.Machine.Arch)
	fmt.Fprintf(&b, "ran: %s\n", planText(rep))
	if rep.Interrupted {
		b.WriteString("INTERRUPTED: the figures below are what was measured before the stop.\n")
	}

	b.WriteString("\nbaselines: a raw single-event write loop of each store's medium, 1 writer, run before and after its workloads;\n" +
		"every \"vs base\" below is to their mean (throughput: higher is faster; latency: how many raw writes one op takes);\n" +
		"workloads that read get no ratio: a write baseline does not measure reads\n")
	bt := textTable{header: []string{"STORE", "BASELINE", "EVENTS/S", "P50", "P99", "RUNS (EVENTS/S)", "VERSION"}, left: 2}
	for _, st := range rep.Stores {
		bl := st.Baseline
		switch {
		case bl == nil:
			continue
		case len(bl.Runs) == 0:
			bt.add(st.Name, "none: "+bl.Error, "", "", "", "", st.ServerVersion)
		default:
			var runs []string
			for _, r := range bl.Runs {
				runs = append(runs, GroupDigits(r.EventsPerSec))
			}
			bt.add(st.Name, bl.Name, GroupDigits(bl.EventsPerSec), fmtDur(bl.P50), fmtDur(bl.P99), strings.Join(runs, " / "), st.ServerVersion)
		}
		if c := st.Concurrent; c != nil {
			if len(c.Runs) == 0 {
				bt.add(st.Name, "none: "+c.Error, "", "", "", "", st.ServerVersion)
				continue
			}
			var runs []string
			for _, r := range c.Runs {
				runs = append(runs, GroupDigits(r.EventsPerSec))
			}
			bt.add(st.Name, c.Name+" (the \"vs base\" of workloads of "+strconv.Itoa(c.Workers)+" writers)", GroupDigits(c.EventsPerSec),
				fmtDur(c.P50), fmtDur(c.P99), strings.Join(runs, " / "), st.ServerVersion)
		}
	}
	bt.write(&b)
	for _, st := range rep.Stores {
		if bl := st.Baseline; bl != nil && bl.Spread > unsteady {
			fmt.Fprintf(&b, "note: the baseline runs of %s differ %s: the machine was busy, so its throughput ratios are rough; p50 ratios hold up better\n",
				st.Name, fmtRatio(bl.Spread))
		}
	}

	few := false
	for _, wl := range rep.Workloads {
		unit := strings.ToUpper(string(wl.Unit))
		fmt.Fprintf(&b, "\n%s: %s (%d %s)\n", wl.Name, wl.About, wl.Workers, plural(wl.Workers, "worker"))
		t := textTable{header: []string{"STORE", unit, unit + "/S", "vs BASE", "P50", "vs BASE", "P90", "P99", "vs BASE", "MAX", "N", "ALLOCS/OP", "B/OP", "NOTE"}, left: 1}
		if wl.Bytes {
			t.header = slices.Insert(t.header, len(t.header)-1, "DISK B/EVENT", "SETTLED BY")
		}
		for si, r := range rep.resultsOf(wl.Name) {
			rt, r50, r99 := r.ratios()
			l := r.Latency
			few = few || (l.FewSamples && l.Samples > 0)
			cells := []string{rep.Stores[si].Name, GroupDigits(float64(countOf(r.Result, wl.Unit))), GroupDigits(r.Rate(wl.Unit)), rt,
				fmtDur(l.P50), r50, fmtDur(l.P90), fmtDur(l.P99), r99, fmtDur(l.Max), l.SamplesText(),
				fmtFloat(r.AllocsPerOp), GroupDigits(r.BytesPerOp)}
			if wl.Bytes {
				perEvent, how := "-", ""
				if r.Bytes != nil {
					perEvent, how = fmt.Sprintf("%.1f", r.Bytes.PerEvent), r.Bytes.Settle
				}
				cells = append(cells, perEvent, how)
			}
			t.add(append(cells, r.note())...)
		}
		if len(t.rows) == 0 {
			t.add("(not run)")
		}
		t.write(&b)
	}
	if few {
		b.WriteString("\n" + FewSamplesNote + "\n")
	}
	for _, st := range rep.Stores {
		if st.Error != "" {
			fmt.Fprintf(&b, "\n%s: %s\n", st.Name, termtext.Escape(st.Error))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// planText says what a run measures: its workloads and their budgets,
// naming only the groups it runs.
func planText(rep *BenchReport) string {
	var names []string
	suite, scale := false, false
	for _, w := range rep.Workloads {
		names = append(names, w.Name)
		suite, scale = suite || !w.Scale, scale || w.Scale
	}
	s := fmt.Sprintf("%d %s (%s)", len(names), plural(len(names), "workload"), strings.Join(names, ", "))
	return s + "; " + budgetText(rep.Events, rep.Duration, rep.Rate, suite, scale)
}

// budgetText describes the budget, time cap and rate cap of a run that
// has suite and/or scale workloads.
func budgetText(events int, d time.Duration, rate float64, suite, scale bool) string {
	var s string
	switch {
	case events > 0:
		s = GroupDigits(float64(events)) + " events (or ops) per workload and baseline"
	case suite && scale:
		s = fmt.Sprintf("%s events (or ops) per suite workload and baseline, scale workloads %s on memory and %s elsewhere",
			GroupDigits(DefaultBenchEvents), GroupDigits(DefaultScaleEventsMemory), GroupDigits(DefaultScaleEvents))
	case scale:
		s = fmt.Sprintf("%s events (or ops) per workload on memory and %s elsewhere, baselines %s",
			GroupDigits(DefaultScaleEventsMemory), GroupDigits(DefaultScaleEvents), GroupDigits(DefaultBenchEvents))
	default:
		s = GroupDigits(DefaultBenchEvents) + " events (or ops) per workload and baseline"
	}
	switch {
	case d > 0:
		s += fmt.Sprintf(", at most %v each", d)
	case d == 0 && scale && suite:
		s += fmt.Sprintf(", at most %v each (scale workloads: no time cap)", DefaultBenchDuration)
	case d == 0 && scale:
		s += fmt.Sprintf(", no time cap (baselines at most %v)", DefaultBenchDuration)
	case d == 0:
		s += fmt.Sprintf(", at most %v each", DefaultBenchDuration)
	default:
		s += ", no time cap"
	}
	if rate > 0 {
		s += fmt.Sprintf(", workloads capped at %s ops/s", GroupDigits(rate))
	}
	return s
}

// textTable aligns cells: the first left columns and the last one to the
// left, the others (numbers) to the right.
type textTable struct {
	header []string
	rows   [][]string
	left   int
}

func (t *textTable) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *textTable) write(b *strings.Builder) {
	widths := make([]int, len(t.header))
	for _, row := range append([][]string{t.header}, t.rows...) {
		for i, c := range row {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	for _, row := range append([][]string{t.header}, t.rows...) {
		var line strings.Builder
		for i := range widths {
			c := ""
			if i < len(row) {
				c = row[i]
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				line.WriteString("  ")
			}
			if i < t.left || i == len(widths)-1 {
				line.WriteString(c + pad)
			} else {
				line.WriteString(pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

// GroupDigits formats f rounded to an integer with thousands separators:
// 1,234,567; "-" for NaN and infinities.
func GroupDigits(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "-"
	}
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fmtDur prints a duration with three significant digits; "-" for none.
func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return workload.Round(d).String()
}

// fmtRatio prints a ratio with two significant digits: 0.23x, 4.2x, 57x.
func fmtRatio(r float64) string {
	switch {
	case r <= 0 || math.IsNaN(r) || math.IsInf(r, 0):
		return "-"
	case r < 0.1:
		return strconv.FormatFloat(r, 'g', 2, 64) + "x"
	case r < 10:
		return strconv.FormatFloat(r, 'f', max(0, 1-int(math.Floor(math.Log10(r)))), 64) + "x"
	}
	return strconv.FormatFloat(math.Round(r), 'f', 0, 64) + "x"
}

func fmtFloat(f float64) string {
	if f < 10 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return GroupDigits(f)
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// ratios formats a result's throughput, p50 and p99 ratios to its baseline;
// empty when there was no baseline, "read" for a workload that reads.
func (r BenchResult) ratios() (throughput, p50, p99 string) {
	if v := r.VsBaseline; v != nil {
		return fmtRatio(v.Throughput), fmtRatio(v.P50), fmtRatio(v.P99)
	}
	if !Writes(r.Workload) {
		return "(read)", "", ""
	}
	return "", "", ""
}

// note says why a result stopped before its budget, and its error if any.
func (r BenchResult) note() string {
	note := ""
	switch r.Stopped {
	case workload.StopDuration:
		note = "time cap"
	case workload.StopInterrupted:
		note = "interrupted"
	}
	if r.Error != "" {
		note = join(note, "error: "+r.Error)
	}
	return note
}
