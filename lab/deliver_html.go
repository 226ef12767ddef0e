package lab

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"slices"
)

// DeliverCharts returns the charts of a deliver-bench run as inline SVG:
// events per second against concurrency, a line per sink and latency with
// the ideal C/L dashed beside it, and the efficiency.
func DeliverCharts(rs []DeliverResult) []template.HTML {
	if len(rs) == 0 {
		return nil
	}
	type key struct {
		sink string
		l    float64
	}
	var keys []key
	for _, r := range rs {
		if k := (key{r.Sink, r.LatencyMS}); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	rate := LineChart{Title: "Events/s by concurrency (ideal C/L dashed)", XLabel: "concurrency", LogX: true}
	eff := LineChart{Title: "Efficiency = throughput / (C/L)", XLabel: "concurrency", LogX: true, FormatY: trimZero}
	for _, k := range keys {
		name := fmt.Sprintf("%s L=%gms", k.sink, k.l)
		got, ideal, e := Series{Name: name}, Series{Name: name + " ideal", Dashed: true}, Series{Name: name}
		for _, r := range rs {
			if r.Sink != k.sink || r.LatencyMS != k.l {
				continue
			}
			c := float64(r.Concurrency)
			got.X, got.Y = append(got.X, c), append(got.Y, r.EventsPerS)
			e.X, e.Y = append(e.X, c), append(e.Y, r.Efficiency)
			if k.l > 0 {
				ideal.X, ideal.Y = append(ideal.X, c), append(ideal.Y, c/(k.l/1000))
			}
		}
		rate.Series = append(rate.Series, got)
		if len(ideal.X) > 0 {
			rate.Series = append(rate.Series, ideal)
		}
		eff.Series = append(eff.Series, e)
	}
	return []template.HTML{rate.SVG(), eff.SVG()}
}

// WriteDeliverHTML writes a self-contained page with the charts of
// DeliverCharts and the table.
func WriteDeliverHTML(w io.Writer, rs []DeliverResult) error {
	var table bytes.Buffer
	if err := PrintDeliverTable(&table, rs); err != nil {
		return err
	}
	var lines []string
	if len(rs) > 0 {
		r := rs[0]
		lines = append(lines, fmt.Sprintf("%d commits x %d events over %d streams, ordering %s, store %s.",
			r.Transactions, r.Events/max(r.Transactions, 1), r.Streams, r.Ordering, r.Store))
	}
	m := Machine()
	lines = append(lines, fmt.Sprintf("Machine: %s, %d cores, %s.", m.CPU, m.Cores, m.GoVersion))
	return page{Title: "varve deliver-bench", Lines: lines, Charts: DeliverCharts(rs), Pre: table.String()}.write(w)
}
