package lab

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"slices"
	"time"
)

// DeliverCharts returns the charts of a deliver-bench run as inline SVG,
// a pair per sink latency: events per second against workers, a line per
// sink with the ideal C/L dashed, and the efficiency of each sink.
func DeliverCharts(rs []DeliverResult) []template.HTML {
	var delays []time.Duration
	for _, r := range rs {
		if !slices.Contains(delays, r.SinkDelay) {
			delays = append(delays, r.SinkDelay)
		}
	}
	var out []template.HTML
	for _, l := range delays {
		var sinks []string
		var workers []float64
		for _, r := range rs {
			if r.SinkDelay != l {
				continue
			}
			if !slices.Contains(sinks, r.Sink) {
				sinks = append(sinks, r.Sink)
			}
			if w := float64(r.Workers); !slices.Contains(workers, w) {
				workers = append(workers, w)
			}
		}
		slices.Sort(workers)
		title := fmt.Sprintf("sink latency %v", l)
		rate := LineChart{Title: title + ": events/s by workers", XLabel: "workers", LogX: true, XTicks: workers}
		eff := LineChart{Title: title + ": efficiency = events/s / (C/L)", XLabel: "workers", LogX: true, XTicks: workers, FormatY: trimZero}
		for i, sink := range sinks {
			got, e := Series{Name: sink, Color: storeColor(i)}, Series{Name: sink, Color: storeColor(i)}
			for _, r := range rs {
				if r.Sink != sink || r.SinkDelay != l {
					continue
				}
				c := float64(r.Workers)
				got.X, got.Y = append(got.X, c), append(got.Y, r.EventsPerS)
				e.X, e.Y = append(e.X, c), append(e.Y, r.Efficiency)
			}
			rate.Series = append(rate.Series, got)
			eff.Series = append(eff.Series, e)
		}
		ideal := Series{Name: "ideal C/L", Dashed: true, Color: "#8a93a3"}
		for _, c := range workers {
			ideal.X, ideal.Y = append(ideal.X, c), append(ideal.Y, c/l.Seconds())
		}
		rate.Series = append(rate.Series, ideal)
		out = append(out, rate.SVG(), eff.SVG())
	}
	return out
}

// WriteDeliverHTML writes a self-contained page with the charts of
// DeliverCharts and the table.
func WriteDeliverHTML(w io.Writer, rs []DeliverResult) error {
	var table bytes.Buffer
	if err := PrintDeliverTable(&table, rs); err != nil {
		return err
	}
	var lines []string
	title := "varve deliver-bench"
	if len(rs) > 0 {
		r := rs[0]
		title += ": " + r.Store
		lines = append(lines, fmt.Sprintf("%s commits x %d events over %s streams, ordering %s, store %s.",
			GroupDigits(float64(r.Transactions)), r.Events/max(r.Transactions, 1), GroupDigits(float64(r.Streams)), r.Ordering, r.Store))
	}
	m := Machine()
	lines = append(lines, fmt.Sprintf("Machine: %s, %d cores, %s.", m.CPU, m.Cores, m.GoVersion))
	return page{Title: title, Lines: lines, Charts: DeliverCharts(rs), Pre: table.String()}.write(w)
}
