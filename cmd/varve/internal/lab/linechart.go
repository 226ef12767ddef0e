package lab

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// Series is one line of a line chart.
type Series struct {
	Name   string
	X, Y   []float64
	Dashed bool
	// Color overrides the series' palette colour.
	Color string
}

// LineChart describes a chart with a linear y axis from 0 and a linear or
// base-2 logarithmic x axis. The legend goes under the plot, as many rows
// as it needs.
type LineChart struct {
	Title, XLabel string
	LogX          bool // base 2, for worker counts
	// XTicks are the x values to label; default round values (or powers
	// of 2 on a log axis).
	XTicks  []float64
	FormatX func(float64) string
	FormatY func(float64) string
	Series  []Series
}

// SVG draws the chart as inline SVG.
func (c LineChart) SVG() template.HTML {
	const (
		width, plotHeight        = 560, 230
		left, right, top, bottom = 64.0, 16.0, 26.0, 40.0
		legendRow                = 17.0
	)
	// Lay the legend out first: it sets the height.
	type entry struct{ x, y float64 }
	var entries []entry
	lx, ly := left, float64(plotHeight)+6
	for _, se := range c.Series {
		w := 30 + 6.2*float64(utf8.RuneCountInString(se.Name)) + 14
		if lx+w > width-right && lx > left {
			lx, ly = left, ly+legendRow
		}
		entries = append(entries, entry{lx, ly})
		lx += w
	}
	height := plotHeight + 10
	if len(entries) > 0 {
		height = int(ly + legendRow + 4)
	}
	s := newSVG(width, height)
	s.text(width/2, 15, "middle", "label", c.Title)
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	tx := func(x float64) float64 { return x }
	if c.LogX {
		tx = math.Log2
	}
	for _, se := range c.Series {
		for i := range se.X {
			xmin, xmax = min(xmin, tx(se.X[i])), max(xmax, tx(se.X[i]))
			ymax = max(ymax, se.Y[i])
		}
	}
	if math.IsInf(xmin, 1) || ymax == 0 {
		return ""
	}
	if xmax == xmin {
		xmin, xmax = xmin-0.5, xmax+0.5
	}
	ph := float64(plotHeight)
	px := func(x float64) float64 { return left + (tx(x)-xmin)/(xmax-xmin)*(width-left-right) }
	py := func(y float64) float64 { return ph - bottom - y/(ymax*1.05)*(ph-top-bottom) }
	fx, fy := c.FormatX, c.FormatY
	if fx == nil {
		fx = trimZero
	}
	if fy == nil {
		fy = siRate
	}
	for _, t := range niceTicks(ymax * 1.05) {
		s.line(left, py(t), width-right, py(t), "grid")
		s.text(left-4, py(t)+4, "end", "tick", fy(t))
	}
	xs := c.XTicks
	switch {
	case len(xs) > 0:
	case c.LogX:
		for e := math.Ceil(xmin); e <= xmax; e++ {
			xs = append(xs, math.Exp2(e))
		}
	default:
		for _, t := range niceTicks(xmax - xmin) {
			xs = append(xs, xmin+t)
		}
	}
	for _, x := range xs {
		s.line(px(x), top, px(x), ph-bottom, "grid")
		s.text(px(x), ph-bottom+14, "middle", "tick", fx(x))
	}
	s.text(left+(width-left-right)/2, ph-8, "middle", "tick", c.XLabel)
	for i, se := range c.Series {
		pts := make([]string, len(se.X))
		for j := range se.X {
			pts[j] = fmt.Sprintf("%.1f,%.1f", px(se.X[j]), py(se.Y[j]))
		}
		dash := ""
		if se.Dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		col := se.Color
		if col == "" {
			col = storeColor(i)
		}
		name := template.HTMLEscapeString(se.Name)
		s.add(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.8"%s><title>%s</title></polyline>`, strings.Join(pts, " "), col, dash, name)
		for j := range se.X {
			s.add(`<circle cx="%.1f" cy="%.1f" r="2.4" fill="%s"><title>%s: %s at %s</title></circle>`, px(se.X[j]), py(se.Y[j]), col, name, fy(se.Y[j]), fx(se.X[j]))
		}
		e := entries[i]
		s.add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.2"%s/>`, e.x, e.y+8, e.x+24, e.y+8, col, dash)
		s.text(e.x+30, e.y+12, "start", "tick", se.Name)
	}
	return s.html(c.Title)
}

// page is a self-contained HTML report: a title, lines of text, charts and
// preformatted text (the CLI's table), with no script and no network.
type page struct {
	Title  string
	Lines  []string
	Charts []template.HTML
	Pre    string
}

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
.scroll{overflow-x:auto}
h1{font-size:22px} p{margin:4px 0;color:#444}
.charts{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
svg{background:#fff;border:1px solid #ddd;border-radius:4px}
.grid{stroke:#e5e5e5;stroke-width:1}
.tick{font-size:11px;fill:#555}
.label{font-size:13px;font-weight:600;fill:#222}
pre{background:#f6f6f6;padding:12px;border-radius:4px;font-size:12px;overflow-x:auto}
</style></head><body>
<h1>{{.Title}}</h1>
{{range .Lines}}<p>{{.}}</p>
{{end}}<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
{{if .Pre}}<div class="scroll"><pre>{{.Pre}}</pre></div>{{end}}
</body></html>
`))

func (p page) write(w io.Writer) error { return pageTemplate.Execute(w, p) }
