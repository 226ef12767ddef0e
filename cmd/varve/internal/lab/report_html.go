package lab

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

// WriteMatrixHTML writes a matrix report as one self-contained HTML page:
// the total rate of every mix against goroutines, each mix's read and write
// rates, and the table.
func WriteMatrixHTML(w io.Writer, rep MatrixReport) error {
	var table bytes.Buffer
	if err := PrintMatrix(&table, rep); err != nil {
		return err
	}
	total := LineChart{Title: "Total rate (ops/s) by workers", XLabel: "workers", LogX: true}
	var perMix []template.HTML
	for i := 0; i < len(rep.Cells); {
		mix := rep.Cells[i].Mix
		tot := Series{Name: mix}
		rd, wr := Series{Name: "reads/s"}, Series{Name: "writes/s", Dashed: true}
		for ; i < len(rep.Cells) && rep.Cells[i].Mix == mix; i++ {
			c := rep.Cells[i]
			p := float64(c.Workers)
			tot.X, tot.Y = append(tot.X, p), append(tot.Y, c.ReadRate+c.WriteRate)
			rd.X, rd.Y = append(rd.X, p), append(rd.Y, c.ReadRate)
			wr.X, wr.Y = append(wr.X, p), append(wr.Y, c.WriteRate)
		}
		total.Series = append(total.Series, tot)
		perMix = append(perMix, LineChart{Title: mix + " reads/s and writes/s", XLabel: "workers", LogX: true, Series: []Series{rd, wr}}.SVG())
	}
	return page{
		Title: "varve matrix: " + rep.Store,
		Lines: []string{
			fmt.Sprintf("%s streams; %v per cell; point reads read a random stream's last event, point writes append to a random stream.", GroupDigits(float64(rep.Streams)), rep.Duration),
			fmt.Sprintf("Machine: %s, %d cores, %s.", rep.Machine.CPU, rep.Machine.Cores, rep.Machine.GoVersion),
		},
		Charts: append([]template.HTML{total.SVG()}, perMix...),
		Pre:    table.String(),
	}.write(w)
}

// WriteSoakHTML writes a soak report as one self-contained HTML page: memory
// (heap, live heap, RSS), throughput and goroutines over time, and the final
// table with the verdict.
func WriteSoakHTML(w io.Writer, rep SoakReport) error {
	var text bytes.Buffer
	if err := PrintSoak(&text, rep); err != nil {
		return err
	}
	heap, live, rss := Series{Name: "heap alloc"}, Series{Name: "live heap"}, Series{Name: "RSS", Dashed: true}
	ops, gor := Series{Name: "ops/s"}, Series{Name: "goroutines"}
	// No RSS in a browser: the memory the runtime holds from the system
	// stands in.
	noRSS := len(rep.Samples) > 0 && rep.Samples[len(rep.Samples)-1].RSS == 0
	if noRSS {
		rss.Name = "Sys (no RSS here)"
	}
	for i, s := range rep.Samples {
		t := s.At.Seconds()
		heap.X, heap.Y = append(heap.X, t), append(heap.Y, mib(s.HeapAlloc))
		live.X, live.Y = append(live.X, t), append(live.Y, mib(s.HeapLive))
		if noRSS {
			rss.X, rss.Y = append(rss.X, t), append(rss.Y, mib(s.Sys))
		} else {
			rss.X, rss.Y = append(rss.X, t), append(rss.Y, mib(s.RSS))
		}
		gor.X, gor.Y = append(gor.X, t), append(gor.Y, float64(s.Goroutines))
		if i > 0 {
			if dt := t - rep.Samples[i-1].At.Seconds(); dt > 0 {
				ops.X, ops.Y = append(ops.X, t), append(ops.Y, float64(s.Ops-rep.Samples[i-1].Ops)/dt)
			}
		}
	}
	mibs := func(v float64) string { return trimZero(v) + " MiB" }
	verdict := "memory stayed flat"
	switch rep.Verdict.Status {
	case Growing:
		verdict = "memory did NOT stay flat"
	case Insufficient:
		verdict = "insufficient data (the run was too short to judge)"
	}
	limit := "memory limit " + MiB(uint64(rep.MemoryLimit))
	if rep.MemoryLimit == 0 {
		limit = "no memory limit"
	}
	head := fmt.Sprintf("%s mode, %v, %s, prune above %d live events. Verdict: %s.", rep.Mode, rep.Duration, limit, rep.PruneAbove, verdict)
	if rep.Mode == Discovery {
		if rep.Verdict.Status == Growing {
			verdict = "memory grew, as it does in discovery mode"
		}
		head = fmt.Sprintf("%s mode (no pruning), %v, %s. Verdict: %s.", rep.Mode, rep.Duration, limit, verdict)
	}
	lines := []string{
		head,
		fmt.Sprintf("Environment: %s. Machine: %s, %d cores, %s.", rep.Environment, rep.Machine.CPU, rep.Machine.Cores, rep.Machine.GoVersion),
	}
	if rep.Ended != "" {
		lines = append(lines, "Ended: "+rep.Ended+".")
	}
	if c := rep.Ceiling; c != nil {
		lines = append(lines, fmt.Sprintf("Ceiling: live heap %s holding %d events at %.0f ops/s, %v in.", MiB(c.HeapLive), c.LiveEvents, c.Rate, c.At.Round(time.Millisecond)))
	}
	return page{
		Title: "varve soak: " + rep.Store,
		Lines: lines,
		Charts: []template.HTML{
			LineChart{Title: "Memory over time", XLabel: "time", FormatX: seconds, FormatY: mibs, Series: []Series{heap, live, rss}}.SVG(),
			LineChart{Title: "Throughput over time", XLabel: "time", FormatX: seconds, Series: []Series{ops}}.SVG(),
			LineChart{Title: "Goroutines over time", XLabel: "time", FormatX: seconds, FormatY: trimZero, Series: []Series{gor}}.SVG(),
		},
		Pre: text.String(),
	}.write(w)
}

// WriteLoadtestHTML writes loadtest results as one self-contained HTML
// page: cycles per second over the run and the cycle latency percentiles, a
// line per store, and the text results.
func WriteLoadtestHTML(w io.Writer, rs []LoadtestResult) error {
	var text bytes.Buffer
	var stores []string
	rate := LineChart{Title: "Cycles/s per batch over the run", XLabel: "time", FormatX: seconds}
	lat := LineChart{Title: "Cycle latency percentiles", XLabel: "percentile", XTicks: []float64{1, 2, 3, 4, 5},
		FormatX: func(v float64) string {
			if i := int(v) - 1; i >= 0 && i < len(percentileNames) && float64(i+1) == v {
				return percentileNames[i]
			}
			return ""
		},
		FormatY: func(v float64) string { return fmtDur(time.Duration(v)) }}
	for i, r := range rs {
		if err := PrintLoadtestResult(&text, r); err != nil {
			return err
		}
		stores = append(stores, r.Store)
		se := Series{Name: r.Store, Color: storeColor(i)}
		for _, p := range r.Timeline {
			se.X, se.Y = append(se.X, p.At.Seconds()), append(se.Y, p.OpsPerSec)
		}
		if len(se.X) > 0 {
			rate.Series = append(rate.Series, se)
		}
		if r.Latency.Samples > 0 {
			ls := Series{Name: r.Store, Color: storeColor(i)}
			for j, d := range percentiles(r.Latency) {
				ls.X, ls.Y = append(ls.X, float64(j+1)), append(ls.Y, float64(d))
			}
			lat.Series = append(lat.Series, ls)
		}
	}
	var charts []template.HTML
	for _, c := range []LineChart{rate, lat} {
		if svg := c.SVG(); svg != "" {
			charts = append(charts, svg)
		}
	}
	m := Machine()
	lines := []string{fmt.Sprintf("Machine: %s, %d cores, %s.", m.CPU, m.Cores, m.GoVersion)}
	if len(rs) > 0 {
		c := rs[0].Config
		lines = append([]string{fmt.Sprintf("%d %s over %d users; snapshots %v, cache %v.", rs[0].Workers, plural(rs[0].Workers, "worker"), c.Users, c.Snapshots, c.Cache)}, lines...)
	}
	return page{Title: "varve loadtest: " + strings.Join(stores, ", "), Lines: lines, Charts: charts, Pre: text.String()}.write(w)
}
