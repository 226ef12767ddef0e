package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
)

// Upper bounds of the count flags: a value above one is refused before
// anything runs, so that a typo cannot start a hundred million goroutines.
const (
	maxWorkers      = 10_000        // goroutines of a run: workers, concurrency
	maxListValues   = 64            // values of a list flag (workers, latencies, mixes)
	maxEvents       = 100_000_000   // bench events, loadtest ops, deliver-bench commits
	maxStreams      = 10_000_000    // streams to fill or spread over
	maxUsers        = 10_000_000    // loadtest users, soak aggregates, cache sizes
	maxBatch        = 10_000        // events in one commit (the store's own limit)
	maxPruneAbove   = 1_000_000_000 // soak's live events
	maxRate         = 10_000_000    // ops per second
	maxDuration     = 7 * 24 * time.Hour
	maxSinkLatency  = time.Minute
	maxPoisonStream = maxStreams
)

// countFlag checks a count flag against [lo, hi]; the error names the flag.
func countFlag(name string, v, lo, hi int) error {
	switch {
	case v < lo && lo == 1:
		return usagef("--%s %d: want at least 1", name, v)
	case v < lo:
		return usagef("--%s %d: want at least %d", name, v, lo)
	case v > hi:
		return usagef("--%s %d: at most %s", name, v, group(hi))
	}
	return nil
}

// firstError returns the first of errs that is not nil: the checks of a
// command's flags, in the order they are reported.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// durationFlag checks a duration flag; zero is allowed when zeroMeans says
// what it means, and refused otherwise.
func durationFlag(name string, d time.Duration, zeroOK bool) error {
	switch {
	case d < 0:
		return usagef("--%s %v: want a positive duration", name, d)
	case d == 0 && !zeroOK:
		return usagef("--%s 0: want a positive duration, such as 500ms or 2m", name)
	case d > maxDuration:
		return usagef("--%s %v: at most %v", name, d, maxDuration)
	}
	return nil
}

func rateFlag(r float64) error {
	switch {
	case r < 0:
		return usagef("--rate %g: want 0 (no cap) or a positive rate", r)
	case r > maxRate:
		return usagef("--rate %g: at most %s per second", r, group(maxRate))
	}
	return nil
}

func group(n int) string { return lab.GroupDigits(float64(n)) }

// listFlag is a flag of comma-separated values, shown as given: "1,2,4".
// The first use replaces the default; more uses add to it.
type listFlag[T any] struct {
	vals       []T
	set        bool
	typ, what  string // the flag's type in the help; what a value must be
	parse      func(string) (T, error)
	formatting func(T) string
}

// newIntList is a flag of comma-separated integers.
func newIntList(def ...int) *listFlag[int] {
	return &listFlag[int]{vals: def, typ: "list", what: "an integer", parse: strconv.Atoi, formatting: strconv.Itoa}
}

// newMsList is a flag of comma-separated durations in milliseconds.
func newMsList(def ...float64) *listFlag[float64] {
	return &listFlag[float64]{vals: def, typ: "ms-list", what: "a number of milliseconds",
		parse:      func(s string) (float64, error) { return strconv.ParseFloat(strings.TrimSuffix(s, "ms"), 64) },
		formatting: func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }}
}

func (l *listFlag[T]) String() string {
	parts := make([]string, len(l.vals))
	for i, v := range l.vals {
		parts[i] = l.formatting(v)
	}
	return strings.Join(parts, ",")
}

func (l *listFlag[T]) Set(s string) error {
	var vals []T
	for _, part := range strings.Split(s, ",") {
		v, err := l.parse(strings.TrimSpace(part))
		if err != nil {
			return fmt.Errorf("%q is not %s", part, l.what)
		}
		vals = append(vals, v)
	}
	if !l.set {
		l.vals, l.set = nil, true
	}
	l.vals = append(l.vals, vals...)
	return nil
}

func (l *listFlag[T]) Type() string { return l.typ }

// count bounds the length of the list flag name.
func (l *listFlag[T]) count(name string) error {
	if len(l.vals) == 0 {
		return usagef("--%s: give at least one value", name)
	}
	if len(l.vals) > maxListValues {
		return usagef("--%s: %d values, at most %d", name, len(l.vals), maxListValues)
	}
	return nil
}

// checkInts bounds every value of the list flag name and its length.
func checkInts(l *listFlag[int], name string, lo, hi int) error {
	if err := l.count(name); err != nil {
		return err
	}
	for _, v := range l.vals {
		if err := countFlag(name, v, lo, hi); err != nil {
			return err
		}
	}
	return nil
}

// msDurations returns the values of the list flag name as durations,
// checked.
func msDurations(l *listFlag[float64], name string) ([]time.Duration, error) {
	if err := l.count(name); err != nil {
		return nil, err
	}
	var out []time.Duration
	for _, v := range l.vals {
		d := time.Duration(v * float64(time.Millisecond))
		if d <= 0 || d > maxSinkLatency {
			return nil, usagef("--%s %s: want a latency above 0 and at most %v", name, strconv.FormatFloat(v, 'f', -1, 64), maxSinkLatency)
		}
		out = append(out, d)
	}
	return out, nil
}

// common are the flags every lab command shares.
type common struct {
	stores   []string
	keep     bool
	duration time.Duration
	rate     float64
	out      outputs
}

// storeFlag registers --store; repeatable says whether the command runs
// several stores one after the other.
func (c *common) storeFlag(f *pflag.FlagSet, repeatable bool) {
	help := "store to run on: sqlite (a temporary file, the default), memory, postgres, nats or a URL (see below)"
	if repeatable {
		help += "; repeatable: stores run one after the other"
	}
	f.StringArrayVar(&c.stores, "store", nil, help)
	f.BoolVar(&c.keep, "keep", false, "keep the schema or stream a run on PostgreSQL or NATS made for itself instead of dropping it")
}

// limitFlags registers -d/--duration and -r/--rate.
func (c *common) limitFlags(f *pflag.FlagSet, def time.Duration, durationHelp, rateHelp string) {
	f.DurationVarP(&c.duration, "duration", "d", def, durationHelp)
	f.Float64VarP(&c.rate, "rate", "r", 0, rateHelp+" (0: no cap)")
}

// storeHelp ends the help of every lab command.
const storeHelp = `

` + lab.StoreForms + `

Output: a table on stdout (progress on stderr); --json prints the JSON envelope
instead, --csv the rows as CSV, --html FILE writes a self-contained report;
--json=FILE and --csv=FILE write files. --check 'p99<5ms' (repeatable) fails
the run (exit 1) when a row misses it; metrics: ` + lab.CheckMetrics + `.
Exit codes: 0 ok, 1 errors or checks not met, 2 usage, 130 interrupted.`
