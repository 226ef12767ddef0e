package lab

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

// WriteBenchHTML writes a report as one self-contained HTML page: inline
// CSS and SVG charts (throughput per workload and store, latency
// percentiles, latency over time), the tables of the text report and the
// machine it ran on. It loads nothing from the network and runs no script.
func WriteBenchHTML(w io.Writer, rep *BenchReport) error {
	type cell struct {
		Text  string
		Class string
	}
	type table struct {
		Title, About string
		Head         []string
		Rows         [][]cell
	}
	type storeKey struct {
		Name, URL, Color, Backend, Version string
	}
	type about struct{ Store, Name, About string }
	data := struct {
		Rep        *BenchReport
		Budget     string
		Stores     []storeKey
		Throughput template.HTML
		Latency    []template.HTML
		Timelines  []template.HTML
		Baselines  table
		About      []about
		Unsteady   []string
		FewSamples bool
		Tables     []table
	}{Rep: rep, Budget: planText(rep)}

	for i, st := range rep.Stores {
		data.Stores = append(data.Stores, storeKey{st.Name, st.URL, storeColor(i), st.Backend, st.ServerVersion})
	}
	data.Throughput = throughputChart(rep)
	var scaleFirst []BenchWorkload
	for _, scale := range []bool{true, false} {
		for _, wl := range rep.Workloads {
			if wl.Scale == scale {
				scaleFirst = append(scaleFirst, wl)
			}
		}
	}
	for _, wl := range rep.Workloads {
		data.Latency = append(data.Latency, latencyChart(rep, wl))
	}
	for _, wl := range scaleFirst {
		if c := timelineChart(rep, wl); c != "" {
			data.Timelines = append(data.Timelines, c)
		}
	}

	data.Baselines = table{Title: "Baselines", Head: []string{"store", "baseline", "events/s", "p50", "p99", "runs (events/s)", "version"}}
	for _, st := range rep.Stores {
		for _, bl := range []*BenchBaseline{st.Baseline, st.Concurrent} {
			if bl == nil {
				continue
			}
			if len(bl.Runs) == 0 {
				data.Baselines.Rows = append(data.Baselines.Rows, []cell{{st.Name, ""}, {"none", ""}, {}, {}, {}, {}, {st.ServerVersion, ""}})
				data.About = append(data.About, about{st.Name, "no baseline", bl.Error})
				continue
			}
			data.About = append(data.About, about{st.Name, bl.Name, bl.About})
			var runs []string
			for _, r := range bl.Runs {
				runs = append(runs, GroupDigits(r.EventsPerSec))
			}
			if bl.Spread > unsteady {
				data.Unsteady = append(data.Unsteady, fmt.Sprintf("The baseline runs of %s (%s) differ %s: the machine was busy, so its throughput ratios are rough; p50 ratios hold up better.",
					st.Name, bl.Name, fmtRatio(bl.Spread)))
			}
			data.Baselines.Rows = append(data.Baselines.Rows, []cell{{st.Name, ""}, {bl.Name, ""}, {GroupDigits(bl.EventsPerSec), "n"},
				{fmtDur(bl.P50), "n"}, {fmtDur(bl.P99), "n"}, {strings.Join(runs, " / "), "n"}, {st.ServerVersion, ""}})
		}
	}
	for _, wl := range rep.Workloads {
		u := string(wl.Unit)
		t := table{Title: wl.Name, About: wl.About + " (" + GroupDigits(float64(wl.Workers)) + " " + plural(wl.Workers, "worker") + ")",
			Head: []string{"store", u, u + "/s", "vs base", "p50", "vs base", "p90", "p99", "vs base", "p99.9", "max", "samples", "allocs/op", "B/op", "note"}}
		for si, r := range rep.resultsOf(wl.Name) {
			rt, r50, r99 := r.ratios()
			l := r.Latency
			data.FewSamples = data.FewSamples || (l.FewSamples && l.Samples > 0)
			t.Rows = append(t.Rows, []cell{{rep.Stores[si].Name, ""}, {GroupDigits(float64(countOf(r.Result, wl.Unit))), "n"},
				{GroupDigits(r.Rate(wl.Unit)), "n"}, {rt, "n r"}, {fmtDur(l.P50), "n"}, {r50, "n r"}, {fmtDur(l.P90), "n"},
				{fmtDur(l.P99), "n"}, {r99, "n r"}, {fmtDur(l.P999), "n"}, {fmtDur(l.Max), "n"}, {l.SamplesText(), "n"},
				{fmtFloat(r.AllocsPerOp), "n"}, {GroupDigits(r.BytesPerOp), "n"}, {r.note(), "l"}})
		}
		data.Tables = append(data.Tables, t)
	}
	return benchPage.Execute(w, data)
}

var benchPage = template.Must(template.New("bench").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>varve bench {{.Rep.Started.UTC.Format "2006-01-02 15:04"}}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330; margin: 24px auto; max-width: 1160px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #dde1e8; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 18px 0 2px; }
p.about { margin: 0 0 6px; color: #566074; }
.meta { color: #566074; margin: 2px 0; }
.warn { background: #fff4e0; border: 1px solid #f0b44c; padding: 8px 12px; border-radius: 4px; }
.legend span { display: inline-block; margin-right: 18px; }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.grid { display: flex; flex-wrap: wrap; gap: 8px 12px; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 12.5px; margin: 4px 0 8px; }
th, td { padding: 3px 7px; border-bottom: 1px solid #eceff3; text-align: left; white-space: nowrap; }
th { color: #566074; font-weight: 600; background: #f6f7f9; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.r { color: #3b5b92; }
td.l { white-space: normal; color: #566074; min-width: 90px; max-width: 240px; }
dl.about dt { font-weight: 600; display: inline; }
dl.about dd { display: inline; margin: 0 0 0 4px; color: #566074; }
dl.about div { margin: 2px 0; }
svg { background: #fff; }
svg text { font: 11px system-ui, sans-serif; fill: #1d2330; }
svg text.tick { fill: #6b7485; font-size: 10px; }
svg text.muted { fill: #6b7485; }
svg text.label { font-weight: 600; }
svg text.value { font-size: 10.5px; fill: #3a4150; }
svg line.grid { stroke: #e6e9ee; stroke-width: 1; }
svg line.base { stroke: #1d2330; stroke-width: 2; }
</style>
</head>
<body>
<h1>varve bench</h1>
<p class="meta">{{.Rep.Started.UTC.Format "2006-01-02 15:04 MST"}} · varve {{.Rep.Varve}} · {{.Rep.Machine.CPU}}, {{.Rep.Machine.Cores}} cores, GOMAXPROCS {{.Rep.Machine.GOMAXPROCS}} · {{.Rep.Machine.GoVersion}} {{.Rep.Machine.OS}}/{{.Rep.Machine.Arch}}</p>
<p class="meta">Ran: {{.Budget}}.</p>
{{if .Rep.Interrupted}}<p class="warn">The run was interrupted: this report holds what was measured before the stop.</p>{{end}}
<p class="legend">{{range .Stores}}<span title="{{.URL}}"><i style="background:{{.Color}}"></i>{{.Name}} ({{.Backend}}{{if .Version}}, {{.Version}}{{end}})</span>{{end}}</p>

<h2>Throughput per workload</h2>
{{.Throughput}}

<h2>Latency percentiles of one op</h2>
<div class="grid">{{range .Latency}}{{.}}{{end}}</div>

{{if .Timelines}}<h2>Latency over time</h2>
<p class="about">Per interval of the run: p99 solid, p50 dashed, a dot per interval (every 250 ms; a run shorter than that is one dot at its end; longer runs merge neighbouring intervals, whose p99 is then the larger of the two).</p>
<p class="legend">{{range .Stores}}<span><i style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}</p>
<div class="grid">{{range .Timelines}}{{.}}{{end}}</div>{{end}}

<h2>Baselines</h2>
<p class="about">A raw single-event write loop of each store's medium, 1 writer, run before and after the store's workloads. Every "vs base" is to the mean of the runs: for throughput higher is faster (1x = as fast as the raw medium), for latency it is how many raw writes one op takes. Workloads that read get no ratio: a write baseline does not measure reads.</p>
{{template "table" .Baselines}}
<dl class="about">{{range .About}}<div><dt>{{.Store}}, {{.Name}}:</dt><dd>{{.About}}</dd></div>{{end}}</dl>
{{range .Unsteady}}<p class="warn">{{.}}</p>{{end}}

<h2>Workloads</h2>
{{range .Tables}}<h3>{{.Title}}</h3><p class="about">{{.About}}</p>{{template "table" .}}{{end}}
{{if .FewSamples}}<p class="about">* fewer than 100 samples: the p99 and p99.9 are the maximum.</p>{{end}}
</body>
</html>
{{define "table"}}<div class="scroll"><table><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td{{if .Class}} class="{{.Class}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}`))
