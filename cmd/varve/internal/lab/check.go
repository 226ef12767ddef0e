package lab

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/varve-go/varve"
)

// A Check is a threshold on a metric of every row of a run, as k6's
// thresholds: "p99<5ms", "errors==0", "ratio>=0.8". A run whose rows miss a
// check exits 1.
type Check struct {
	Text   string
	Metric string
	Op     string
	Value  float64 // nanoseconds for a latency metric
}

// CheckResult is the outcome of a check over a run.
type CheckResult struct {
	Check  string `json:"check"`
	Passed bool   `json:"passed"`
	// Failures name each row that missed it and its value there.
	Failures []string `json:"failures,omitempty"`
}

// Metrics every command's rows have; latencies take a duration with a
// unit (5ms), the others a number.
var (
	latencyMetrics = []string{"p50", "p90", "p99", "p999", "max", "mean"}
	numberMetrics  = []string{"rate", "count", "errors", "samples", "ratio"}
)

// CheckMetrics is the help text that lists the metrics a check can use.
const CheckMetrics = `p50, p90, p99, p999, max, mean (durations: 250us, 5ms, 1s), rate (per second),
count, errors, samples, ratio; operators <, <=, >, >=, ==, !=`

var checkSyntax = regexp.MustCompile(`^\s*([a-z][a-z0-9]*)\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$`)

// ParseCheck parses a check such as "p99<5ms".
func ParseCheck(s string) (Check, error) {
	m := checkSyntax.FindStringSubmatch(s)
	if m == nil {
		return Check{}, fmt.Errorf("check %q: want METRIC OP VALUE, such as p99<5ms or errors==0: %w", s, varve.ErrInvalidArgument)
	}
	c := Check{Text: strings.TrimSpace(s), Metric: m[1], Op: m[2]}
	switch {
	case slices.Contains(latencyMetrics, c.Metric):
		d, err := time.ParseDuration(m[3])
		if err != nil {
			return Check{}, fmt.Errorf("check %q: %s is a latency: give a duration with its unit, such as 5ms: %w", s, c.Metric, varve.ErrInvalidArgument)
		}
		c.Value = float64(d)
	case slices.Contains(numberMetrics, c.Metric):
		v, err := strconv.ParseFloat(strings.ReplaceAll(m[3], "_", ""), 64)
		if err != nil {
			return Check{}, fmt.Errorf("check %q: %s takes a number: %w", s, c.Metric, varve.ErrInvalidArgument)
		}
		c.Value = v
	default:
		return Check{}, fmt.Errorf("check %q: unknown metric %q; want one of %s: %w", s, c.Metric,
			strings.Join(append(slices.Clone(latencyMetrics), numberMetrics...), ", "), varve.ErrInvalidArgument)
	}
	return c, nil
}

// ParseChecks parses every check or returns the first error.
func ParseChecks(ss []string) ([]Check, error) {
	var out []Check
	for _, s := range ss {
		c, err := ParseCheck(s)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// metric returns a row's value of a metric; false when the row has none
// (a ratio without a baseline, a latency without samples).
func (r Row) metric(name string) (float64, bool) {
	l := r.Latency
	lat := func(d time.Duration) (float64, bool) { return float64(d), l.Samples > 0 }
	switch name {
	case "p50":
		return lat(l.P50)
	case "p90":
		return lat(l.P90)
	case "p99":
		return lat(l.P99)
	case "p999":
		return lat(l.P999)
	case "max":
		return lat(l.Max)
	case "mean":
		return lat(l.Mean)
	case "rate":
		return r.Rate, true
	case "count":
		return float64(r.Count), true
	case "errors":
		return float64(r.Errors), true
	case "samples":
		return float64(l.Samples), true
	case "ratio":
		if r.Ratio == nil {
			return 0, false
		}
		return *r.Ratio, true
	}
	return 0, false
}

func (c Check) holds(v float64) bool {
	switch c.Op {
	case "<":
		return v < c.Value
	case "<=":
		return v <= c.Value
	case ">":
		return v > c.Value
	case ">=":
		return v >= c.Value
	case "==":
		return v == c.Value
	}
	return v != c.Value
}

func (c Check) format(v float64) string {
	if slices.Contains(latencyMetrics, c.Metric) {
		return fmtDur(time.Duration(v))
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// Evaluate runs the checks over rows. A check fails on a row that misses
// it, on a row without a value for its metric, and on a run without rows.
func Evaluate(checks []Check, rows []Row) []CheckResult {
	out := []CheckResult{}
	for _, c := range checks {
		res := CheckResult{Check: c.Text, Passed: true}
		if len(rows) == 0 {
			res.Passed, res.Failures = false, []string{"no results to check"}
		}
		for _, r := range rows {
			v, ok := r.metric(c.Metric)
			switch {
			case !ok:
				res.Passed = false
				res.Failures = append(res.Failures, fmt.Sprintf("%s: no %s", r.Label(), c.Metric))
			case !c.holds(v):
				res.Passed = false
				res.Failures = append(res.Failures, fmt.Sprintf("%s: %s is %s", r.Label(), c.Metric, c.format(v)))
			}
		}
		out = append(out, res)
	}
	return out
}
