package lab

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/varve-go/varve"
)

// BenchConfig configures a Bench run.
type BenchConfig struct {
	Stores []string // store URLs
	Events int      // events per workload
}

// Result is one workload's figures on one store.
type Result struct {
	Store    string        `json:"store"`
	Workload string        `json:"workload"`
	Events   int           `json:"events"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	PerSec   float64       `json:"events_per_sec"`
	P50      time.Duration `json:"p50_ns"`
	P90      time.Duration `json:"p90_ns"`
	P99      time.Duration `json:"p99_ns"`
}

// Bench runs the append and read workloads on every store.
func Bench(ctx context.Context, cfg BenchConfig) ([]Result, error) {
	var out []Result
	for _, u := range cfg.Stores {
		s, err := Open(ctx, u)
		if err != nil {
			return out, err
		}
		for _, w := range []struct {
			name string
			run  func(context.Context, *varve.Store, int, *hdrhistogram.Histogram) error
		}{{"append-single", appendSingle}, {"read-stream", readStream}} {
			h := hdrhistogram.New(1, int64(time.Minute), 3)
			start := time.Now()
			err := w.run(ctx, s, cfg.Events, h)
			el := time.Since(start)
			if err != nil {
				s.Close()
				return out, fmt.Errorf("%s on %s: %w", w.name, Redact(u), err)
			}
			out = append(out, Result{
				Store: Redact(u), Workload: w.name, Events: cfg.Events, Elapsed: el,
				PerSec: float64(cfg.Events) / el.Seconds(),
				P50:    time.Duration(h.ValueAtQuantile(50)), P90: time.Duration(h.ValueAtQuantile(90)), P99: time.Duration(h.ValueAtQuantile(99)),
			})
		}
		if err := s.Close(); err != nil {
			return out, err
		}
	}
	return out, nil
}

func appendSingle(ctx context.Context, s *varve.Store, n int, h *hdrhistogram.Histogram) error {
	data := []byte(`{"user":"u-1","n":1}`)
	for i := range n {
		t := time.Now()
		if _, err := s.Append(ctx, fmt.Sprintf("bench-%d", i%100), varve.Any, varve.Event{Type: "Bench", Data: data}); err != nil {
			return err
		}
		_ = h.RecordValue(int64(time.Since(t)))
	}
	return nil
}

func readStream(ctx context.Context, s *varve.Store, n int, h *hdrhistogram.Histogram) error {
	read := 0
	for read < n {
		t := time.Now()
		for _, err := range s.ReadStream(ctx, fmt.Sprintf("bench-%d", read%100)) {
			if err != nil {
				return err
			}
			read++
		}
		_ = h.RecordValue(int64(time.Since(t)))
	}
	return nil
}

// PrintTable writes results as an aligned table.
func PrintTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "STORE\tWORKLOAD\tEVENTS\tEVENTS/S\tP50\tP90\tP99\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%v\t%v\t%v\t\n", r.Store, r.Workload, r.Events, r.PerSec, r.P50, r.P90, r.P99)
	}
	return tw.Flush()
}
