package shred_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/teststore"
)

// TestSealCost measures what sealing costs: appends of one 100-byte event
// and loads of a 10-event stream, plain and sealed, in interleaved rounds
// on each backend that keeps keys, and prints the medians and their
// ratios. Opt-in (VARVE_SEAL_COST=1, VARVE_SEAL_ROUNDS, default 7): it
// measures, it asserts no speed. docs/privacy.md quotes its figures.
func TestSealCost(t *testing.T) {
	if os.Getenv("VARVE_SEAL_COST") == "" {
		t.Skip("set VARVE_SEAL_COST=1 to measure the cost of sealing")
	}
	rounds := 7
	if n, err := strconv.Atoi(os.Getenv("VARVE_SEAL_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for _, k := range teststore.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			s, sh := k.OpenShredded(t, varve.Config{})
			ctx := context.Background()
			data := make([]byte, 100)
			for i := range data {
				data[i] = 'a' + byte(i%26)
			}
			appends, loads := 400, 400
			if k.Name == "memory" {
				appends, loads = 100000, 50000
			}
			const streamLen = 10
			// Names made once, so that the rounds time the store and the seal.
			subjects := make([]string, 100)
			streams := map[string][]string{}
			for i := range subjects {
				subjects[i] = fmt.Sprintf("subject-%d", i)
				for _, kind := range []string{"plain", "sealed"} {
					streams[kind] = append(streams[kind], fmt.Sprintf("cost%s-%d", kind, i))
				}
			}
			for _, kind := range []string{"plain", "sealed"} {
				for v := range streamLen {
					ev := varve.NewEvent("E", data)
					if kind == "sealed" {
						ev, _ = sh.Seal(ctx, "subject-load", ev)
					}
					if _, err := s.Append(ctx, "load-"+kind, varve.Exact(varve.Version(v)), ev); err != nil {
						t.Fatal(err)
					}
				}
			}
			measure := func(kind, op string, n int) time.Duration {
				start := time.Now()
				for i := range n {
					switch op {
					case "append":
						ev := varve.NewEvent("E", data)
						if kind == "sealed" {
							var err error
							if ev, err = sh.Seal(ctx, subjects[i%100], ev); err != nil {
								t.Fatal(err)
							}
						}
						if _, err := s.Append(ctx, streams[kind][i%100], varve.Any, ev); err != nil {
							t.Fatal(err)
						}
					case "load":
						m := 0
						for _, err := range s.ReadStream(ctx, "load-"+kind) {
							if err != nil {
								t.Fatal(err)
							}
							m++
						}
						if m != streamLen {
							t.Fatalf("read %d events", m)
						}
					}
				}
				return time.Since(start) / time.Duration(n)
			}
			// Warm the key caches and the connections.
			for _, kind := range []string{"plain", "sealed"} {
				measure(kind, "append", 100)
				measure(kind, "load", 100)
			}
			got := map[string][]time.Duration{}
			for r := range rounds {
				order := []string{"plain", "sealed"}
				if r%2 == 1 {
					order = []string{"sealed", "plain"}
				}
				for _, op := range []string{"append", "load"} {
					n := appends
					if op == "load" {
						n = loads
					}
					for _, kind := range order {
						got[op+" "+kind] = append(got[op+" "+kind], measure(kind, op, n))
					}
				}
			}
			med := func(d []time.Duration) time.Duration {
				d = slices.Clone(d)
				slices.Sort(d)
				return d[len(d)/2]
			}
			for _, op := range []string{"append", "load"} {
				p, q := med(got[op+" plain"]), med(got[op+" sealed"])
				var ratios []float64
				for i := range got[op+" plain"] {
					ratios = append(ratios, float64(got[op+" sealed"][i])/float64(got[op+" plain"][i]))
				}
				slices.Sort(ratios)
				t.Logf("%-8s %-6s plain %9v sealed %9v  sealed/plain median of rounds %.3f (min %.3f max %.3f, %d rounds)",
					k.Name, op, p, q, ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], rounds)
			}
		})
	}
}
