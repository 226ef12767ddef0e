package lab

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkLoadtest runs the loadtest cycle in memory; b.N is the number of
// cycles over 100 users.
func BenchmarkLoadtest(b *testing.B) {
	for _, c := range []struct {
		snap, cache bool
		codec       string
	}{{true, false, "json"}, {true, false, "gojson"}, {true, true, "json"}, {false, true, "json"}} {
		b.Run(fmt.Sprintf("snapshot=%v/cache=%v/codec=%s", c.snap, c.cache, c.codec), func(b *testing.B) {
			cfg := DefaultLoadtestConfig()
			cfg.Store, cfg.Ops, cfg.Batch, cfg.Snapshots, cfg.Cache, cfg.SnapshotEvery = "mem", b.N, 1000, c.snap, c.cache, 10
			cfg.Codec = c.codec
			b.ReportAllocs()
			res, err := Loadtest(context.Background(), cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.StoreCallsPerOp, "calls/op")
			b.ReportMetric(float64(res.CPUPerOp.Nanoseconds()), "cpu-ns/op")
		})
	}
}
