package lab

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/components"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// DeliverCharts returns the charts of a deliver-bench run: events per second
// and efficiency against concurrency, a line per sink latency, with the
// ideal C/L for reference.
func DeliverCharts(rs []DeliverResult) []components.Charter {
	if len(rs) == 0 {
		return nil
	}
	var cs []int
	var ls []float64
	for _, r := range rs {
		if !slices.Contains(cs, r.Concurrency) {
			cs = append(cs, r.Concurrency)
		}
		if !slices.Contains(ls, r.LatencyMS) {
			ls = append(ls, r.LatencyMS)
		}
	}
	slices.Sort(cs)
	x := make([]string, len(cs))
	for i, c := range cs {
		x[i] = strconv.Itoa(c)
	}
	sub := fmt.Sprintf("%d commits x %d events over %d streams, ordering %s, store %s",
		rs[0].Transactions, rs[0].Events/max(rs[0].Transactions, 1), rs[0].Streams, rs[0].Ordering, rs[0].Store)
	line := func(title, y string) *charts.Line {
		l := charts.NewLine()
		l.SetGlobalOptions(
			charts.WithTitleOpts(opts.Title{Title: title, Subtitle: sub}),
			charts.WithXAxisOpts(opts.XAxis{Name: "concurrency", Type: "category"}),
			charts.WithYAxisOpts(opts.YAxis{Name: y}),
			charts.WithTooltipOpts(opts.Tooltip{Trigger: "axis"}),
			charts.WithLegendOpts(opts.Legend{Top: "bottom"}),
		)
		l.SetXAxis(x)
		return l
	}
	rate, eff := line("deliver-bench: events/s", "events/s"), line("deliver-bench: efficiency", "throughput / (C/L)")
	for _, l := range ls {
		got := make([]opts.LineData, len(cs))
		ideal := make([]opts.LineData, len(cs))
		e := make([]opts.LineData, len(cs))
		for i, c := range cs {
			ideal[i] = opts.LineData{Value: float64(c) / (l / 1000)}
			got[i], e[i] = opts.LineData{Value: nil}, opts.LineData{Value: nil}
			for _, r := range rs {
				if r.LatencyMS == l && r.Concurrency == c {
					got[i] = opts.LineData{Value: r.EventsPerS}
					e[i] = opts.LineData{Value: r.Efficiency}
				}
			}
		}
		name := fmt.Sprintf("L=%gms", l)
		rate.AddSeries(name, got)
		rate.AddSeries(name+" ideal", ideal)
		eff.AddSeries(name, e)
	}
	return []components.Charter{rate, eff}
}

// WriteDeliverHTML writes a page with the charts of DeliverCharts.
func WriteDeliverHTML(w io.Writer, rs []DeliverResult) error {
	p := components.NewPage().SetPageTitle("varve deliver-bench")
	p.AddCharts(DeliverCharts(rs)...)
	return p.Render(w)
}
