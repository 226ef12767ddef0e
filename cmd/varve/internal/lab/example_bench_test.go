package lab_test

import (
	"context"
	"fmt"

	"github.com/varve-go/varve/cmd/varve/internal/lab"
)

func ExampleBench() {
	store, err := lab.Resolve("memory", lab.NewRunID("example"), lab.ForRun)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Release(context.Background())
	rep, err := lab.Bench(context.Background(), lab.BenchConfig{
		Stores:    []*lab.Target{store},
		Workloads: []string{"append-batch10", "load-100"},
		Events:    1000,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, st := range rep.Stores {
		fmt.Println(st.Name, "baseline:", st.Baseline.Name, len(st.Baseline.Runs), "runs")
		for _, r := range st.Results {
			fmt.Println(r.Workload, r.Events, "events in", r.Ops, "ops; ratio to baseline known:", r.VsBaseline != nil)
		}
	}
	// Print the tables with lab.PrintBench(os.Stdout, rep), or the charts
	// with lab.WriteBenchHTML.

	// Output:
	// memory baseline: mutex+slice 2 runs
	// append-batch10 1000 events in 100 ops; ratio to baseline known: true
	// load-100 1000 events in 10 ops; ratio to baseline known: false
}
