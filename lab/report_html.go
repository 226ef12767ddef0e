package lab

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
)

// WriteMatrixHTML writes a matrix report as one self-contained HTML page:
// the total rate of every mix against goroutines, each mix's read and write
// rates, and the table.
func WriteMatrixHTML(w io.Writer, rep MatrixReport) error {
	var table bytes.Buffer
	if err := PrintMatrix(&table, rep); err != nil {
		return err
	}
	total := LineChart{Title: "Total rate (txn/s) by goroutines", XLabel: "goroutines", LogX: true}
	var perMix []template.HTML
	for i := 0; i < len(rep.Cells); {
		mix := rep.Cells[i].Mix
		tot := Series{Name: mix}
		rd, wr := Series{Name: "reads"}, Series{Name: "writes", Dashed: true}
		for ; i < len(rep.Cells) && rep.Cells[i].Mix == mix; i++ {
			c := rep.Cells[i]
			p := float64(c.Procs)
			tot.X, tot.Y = append(tot.X, p), append(tot.Y, c.ReadRate+c.WriteRate)
			rd.X, rd.Y = append(rd.X, p), append(rd.Y, c.ReadRate)
			wr.X, wr.Y = append(wr.X, p), append(wr.Y, c.WriteRate)
		}
		total.Series = append(total.Series, tot)
		perMix = append(perMix, LineChart{Title: mix + " read/write rate (txn/s)", XLabel: "goroutines", LogX: true, Series: []Series{rd, wr}}.SVG())
	}
	return page{
		Title: "varve matrix: " + rep.Store,
		Lines: []string{
			fmt.Sprintf("%d streams; %s per cell; point reads read a random stream's last event, point writes append to a random stream.", rep.Streams, rep.Duration),
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
	for i, s := range rep.Samples {
		t := s.At.Seconds()
		mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
		heap.X, heap.Y = append(heap.X, t), append(heap.Y, mib(s.HeapAlloc))
		live.X, live.Y = append(live.X, t), append(live.Y, mib(s.HeapLive))
		rss.X, rss.Y = append(rss.X, t), append(rss.Y, mib(s.RSS))
		gor.X, gor.Y = append(gor.X, t), append(gor.Y, float64(s.Goroutines))
		if i > 0 {
			if dt := t - rep.Samples[i-1].At.Seconds(); dt > 0 {
				ops.X, ops.Y = append(ops.X, t), append(ops.Y, float64(s.Ops-rep.Samples[i-1].Ops)/dt)
			}
		}
	}
	secs := func(v float64) string { return trimZero(v) + "s" }
	mibs := func(v float64) string { return trimZero(v) + " MiB" }
	verdict := "memory stayed flat"
	if !rep.Verdict.Flat {
		verdict = "memory did NOT stay flat"
	}
	return page{
		Title: "varve soak: " + rep.Store,
		Lines: []string{
			fmt.Sprintf("%s mode, %s, memory limit %s, prune above %d live events. Verdict: %s.", rep.Mode, rep.Duration, MiB(uint64(rep.MemoryLimit)), rep.PruneAbove, verdict),
			fmt.Sprintf("Machine: %s, %d cores, %s.", rep.Machine.CPU, rep.Machine.Cores, rep.Machine.GoVersion),
		},
		Charts: []template.HTML{
			LineChart{Title: "Memory over time", XLabel: "time", FormatX: secs, FormatY: mibs, Series: []Series{heap, live, rss}}.SVG(),
			LineChart{Title: "Throughput over time", XLabel: "time", FormatX: secs, Series: []Series{ops}}.SVG(),
			LineChart{Title: "Goroutines over time", XLabel: "time", FormatX: secs, FormatY: trimZero, Series: []Series{gor}}.SVG(),
		},
		Pre: text.String(),
	}.write(w)
}
