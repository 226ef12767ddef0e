package retention_test

import (
	"context"
	"fmt"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
	"github.com/varve-go/varve/retention"
)

// A category keeps its last 2 events per stream and nothing older than 30
// days; one stream of it is exempt. One pass of the scavenger applies it.
func Example() {
	ctx := context.Background()
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	for _, stream := range []string{"order-1", "order-2"} {
		for range 5 {
			if _, err := store.Append(ctx, stream, varve.Any, varve.NewEvent("OrderNoted", nil)); err != nil {
				panic(err)
			}
		}
	}
	_ = retention.Set(ctx, store, retention.Target{Category: "order"}, retention.Policy{MaxAge: 30 * 24 * time.Hour, MaxCount: 2})
	_ = retention.Set(ctx, store, retention.Target{Stream: "order-2"}, retention.Policy{}) // exempt

	scavenger, err := retention.New(retention.Config{Store: store})
	if err != nil {
		panic(err)
	}
	report, err := scavenger.ScavengeOnce(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("visited %d streams, removed %d events\n", report.Streams, report.Removed)
	for e := range store.ReadStream(ctx, "order-1") {
		fmt.Println("order-1 keeps version", e.Version)
	}
	rules, _ := retention.List(ctx, store)
	for _, r := range rules {
		fmt.Printf("%s: %s\n", r.Target, r.Policy)
	}
	// Output:
	// visited 1 streams, removed 3 events
	// order-1 keeps version 4
	// order-1 keeps version 5
	// category "order": max age 720h0m0s, max count 2
	// stream "order-2": no limit
}

// Run scavenges on a schedule until its context ends; Hooks.AfterPass sees
// each pass.
func ExampleScavenger_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	store, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	scavenger, err := retention.New(retention.Config{Store: store, Interval: time.Hour,
		Hooks: retention.Hooks{AfterPass: func(r retention.Report, err error) {
			fmt.Printf("pass: %d removed, error %v\n", r.Removed, err)
			cancel()
		}}})
	if err != nil {
		panic(err)
	}
	if err := scavenger.Run(ctx); err != nil {
		panic(err)
	}
	last, ok, _ := retention.LastReport(context.Background(), store)
	fmt.Println("recorded:", ok, last.Removed)
	// Output:
	// pass: 0 removed, error <nil>
	// recorded: true 0
}
