package lab

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// Series is one line of a line chart.
type Series struct {
	Name   string
	X, Y   []float64
	Dashed bool
}

// LineChart describes a chart with a linear y axis from 0 and a linear or
// base-2 logarithmic x axis.
type LineChart struct {
	Title, XLabel string
	LogX          bool // base 2, for goroutine counts
	FormatX       func(float64) string
	FormatY       func(float64) string
	Series        []Series
}

// SVG draws the chart as inline SVG.
func (c LineChart) SVG() template.HTML {
	const (
		width, height            = 540, 240
		left, right, top, bottom = 64.0, 110.0, 26.0, 40.0
	)
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
		xmax = xmin + 1
	}
	px := func(x float64) float64 { return left + (tx(x)-xmin)/(xmax-xmin)*(width-left-right) }
	py := func(y float64) float64 { return height - bottom - y/(ymax*1.05)*(height-top-bottom) }
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
	var xs []float64
	if c.LogX {
		for e := math.Ceil(xmin); e <= xmax; e++ {
			xs = append(xs, math.Exp2(e))
		}
	} else {
		for _, t := range niceTicks(xmax - xmin) {
			xs = append(xs, xmin+t)
		}
	}
	for _, x := range xs {
		s.line(px(x), top, px(x), height-bottom, "grid")
		s.text(px(x), height-bottom+14, "middle", "tick", fx(x))
	}
	s.text(left+(width-left-right)/2, height-6, "middle", "tick", c.XLabel)
	for i, se := range c.Series {
		pts := make([]string, len(se.X))
		for j := range se.X {
			pts[j] = fmt.Sprintf("%.1f,%.1f", px(se.X[j]), py(se.Y[j]))
		}
		dash := ""
		if se.Dashed {
			dash = ` stroke-dasharray="4 3"`
		}
		col := storeColor(i)
		s.add(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"%s><title>%s</title></polyline>`, strings.Join(pts, " "), col, dash, template.HTMLEscapeString(se.Name))
		ly := top + 14 + float64(i)*16
		s.add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`, width-right+8, ly-4, width-right+24, ly-4, col, dash)
		s.text(width-right+28, ly, "start", "tick", se.Name)
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
{{if .Pre}}<pre>{{.Pre}}</pre>{{end}}
</body></html>
`))

func (p page) write(w io.Writer) error { return pageTemplate.Execute(w, p) }
