package soakcore

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/backend/memory"
)

// The workload builds for js/wasm and compiles in no server backend,
// driver, network client or the lab: the browser soak depends on it.
func TestBuildsForWasmWithoutBackends(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".")
	cmd.Env = append(cmd.Environ(), "GOOS=js", "GOARCH=wasm")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list for js/wasm: %v\n%s", err, stderr.String())
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list found %d dependencies; the check would prove nothing", len(deps))
	}
	forbidden := []string{"github.com/varve-go/varve/backend/", "github.com/varve-go/varve/cmd/varve/internal/lab",
		"github.com/jackc/", "github.com/nats-io/", "modernc.org/", "net/http"}
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("soakcore depends on %s", d)
			}
		}
	}
	build := exec.Command(goTool, "build", "-o", t.TempDir()+"/soakcore.a", ".")
	build.Env = append(build.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build for js/wasm: %v\n%s", err, out)
	}
}

func TestRunModes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the workload for seconds")
	}
	cases := []struct {
		name string
		cfg  Config
		// check is what the run must show beyond commands done without
		// errors.
		check func(Result) error
	}{
		{"sustained prunes", Config{Mode: Sustained, Duration: 2 * time.Second, PruneAbove: 300, Workers: 2, Rate: 2000, Aggregates: 100, Interval: 100 * time.Millisecond},
			func(r Result) error {
				if r.Pruned == 0 || r.StopReason != StopDuration {
					return errors.New("sustained run did not prune or stopped early")
				}
				return nil
			}},
		// 1 MiB is below the live heap of the test binary alone, so
		// discovery stops at the first sample instead of running 30 s.
		{"discovery stops at the limit", Config{Mode: Discovery, Duration: 30 * time.Second, MemoryLimit: 1 << 20, Workers: 2, Aggregates: 100, Interval: 100 * time.Millisecond},
			func(r Result) error {
				if !strings.Contains(r.StopReason, "90% of the memory limit") || r.Pruned != 0 {
					return errors.New("discovery did not stop at the limit: " + r.StopReason)
				}
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := varve.New(memory.New(), varve.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var seen []Counts
			tc.cfg.Sample = func(_ MemSample, c Counts) { seen = append(seen, c) }
			res, err := Run(context.Background(), s, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 0 || res.Ops == 0 || res.Appended == 0 || res.Latency.TotalCount() == 0 {
				t.Fatalf("workload did not run cleanly: %+v (first error %q)", res.Counts, res.FirstError)
			}
			if len(seen) == 0 || len(res.Samples) < 2 {
				t.Fatalf("%d samples passed to Sample, %d returned", len(seen), len(res.Samples))
			}
			if err := tc.check(res); err != nil {
				t.Fatalf("%v: %+v", err, res.Counts)
			}
		})
	}
}

func TestRunInterrupted(t *testing.T) {
	s, err := varve.New(memory.New(), varve.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, s, Config{Mode: Sustained, Duration: time.Minute, PruneAbove: 10, Workers: 1, Aggregates: 1, Interval: time.Second})
	if !errors.Is(err, context.Canceled) || !res.Interrupted {
		t.Fatalf("cancelled run: %v, interrupted %v", err, res.Interrupted)
	}
}
