package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// canCap skips, loudly, where no memory cgroup can be created (not Linux,
// no cgroup v1 memory hierarchy, not root).
func canCap(t *testing.T) {
	t.Helper()
	probe := filepath.Join(memoryCgroup, "varve-probe-"+filepath.Base(t.TempDir()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		t.Skipf("SKIPPED LOUDLY: --hard-limit needs a memory cgroup it can create: %v", err)
	}
	_ = os.Remove(probe)
}

// The capped soak in its short forms, under a cgroup and under an
// address-space limit: sustained with the soft limit below a 128 MiB cap
// runs to the end; discovery with no soft limit dies (an out-of-memory
// kill in a 64 MiB cgroup, an allocation failure under RLIMIT_AS), says how, and the parent reports the run from the samples
// the child recorded, with its last figures as the ceiling.
func TestSoakHardLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs soaks of seconds in child processes")
	}
	sustained := []string{"--hard-limit", "128MiB", "--memory-limit", "96MiB", "--duration", "20s", "--rate", "2000", "--interval", "200ms"}
	discovery := []string{"--hard-limit", "64MiB", "--mode", "discovery", "--memory-limit", "0", "--duration", "60s", "--interval", "100ms"}
	cases := []struct {
		name   string
		cgroup bool
		args   []string
		code   int
		died   bool
		want   []string
	}{
		{"cgroup v1 sustained survives 128MiB", true, append([]string{"--cap", "cgroup-v1"}, sustained...),
			0, false, []string{"capped soak: survived, exit code 0", "capped (cgroup v1 memory limit 128.0 MiB)", "memory.limit_in_bytes 128.0 MiB", "oom kills 0"}},
		{"cgroup v1 discovery killed at 64MiB", true, append([]string{"--cap", "cgroup-v1"}, discovery...),
			exitFailed, true, []string{"killed by the kernel's out-of-memory killer", "memory.limit_in_bytes 64.0 MiB", "capped (cgroup v1 memory limit 64.0 MiB)"}},
		// RLIMIT_AS counts address space, which Go reserves in large steps
		// (64 MiB heap arenas): under 128 MiB this sustained run, whose live
		// heap stays under 10 MiB, died of an allocation failure in 1 to 3
		// runs of 4 while another soak loaded the machine; under 256 MiB it
		// survived 6 of 6.
		{"address space sustained survives 256MiB", false, append(append([]string{"--cap", "address-space"}, sustained...), "--duration", "10s", "--hard-limit", "256MiB"),
			0, false, []string{"capped soak: survived, exit code 0", "capped (address space limit (RLIMIT_AS): start-up mappings + 256.0 MiB)", "stopped: duration reached"}},
		// Go's reservations count against RLIMIT_AS in 4-64 MiB steps: the
		// ceiling varies from run to run (0.5 to 10 s at 128 MiB here). The
		// duration of 300 s is a bound on a hang: beside a CPU hog a run of
		// 60 s held only 62.6 MiB live at its end and exited 0.
		{"address space discovery fails to allocate at 128MiB", false, append(append([]string{"--cap", "address-space"}, discovery...), "--hard-limit", "128MiB", "--interval", "50ms", "--duration", "300s"),
			exitFailed, true, []string{"allocation failure: the Go runtime ended the process with exit code 2 (fatal error: ", "capped (address space limit (RLIMIT_AS): start-up mappings + 128.0 MiB)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cgroup {
				canCap(t)
			}
			dir := t.TempDir()
			jsonOut := filepath.Join(dir, "soak.json")
			cmd := exec.Command(binary(t), append([]string{"soak", "--store", "memory", "--json=" + jsonOut}, tc.args...)...)
			cmd.Dir = dir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Fatalf("exit code %d, want %d:\n%s", code, tc.code, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			b, err := os.ReadFile(jsonOut)
			if err != nil {
				t.Fatalf("no JSON report: %v\n%s", err, out.String())
			}
			var env struct {
				Results []struct {
					Count   int64  `json:"count"`
					Stopped string `json:"stopped"`
				} `json:"results"`
				Details struct {
					Environment string `json:"environment"`
					Ended       string `json:"ended"`
					Ceiling     *struct {
						HeapLive   uint64 `json:"heap_live"`
						LiveEvents int64  `json:"live_events"`
					} `json:"ceiling"`
					Samples []json.RawMessage `json:"samples"`
				} `json:"details"`
			}
			if err := json.Unmarshal(b, &env); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(env.Details.Environment, "capped (") || len(env.Results) != 1 || len(env.Details.Samples) < 2 {
				t.Fatalf("the JSON report: environment %q, %d rows, %d samples", env.Details.Environment, len(env.Results), len(env.Details.Samples))
			}
			if tc.died {
				c := env.Details.Ceiling
				if env.Details.Ended == "" || c == nil || c.LiveEvents == 0 || env.Results[0].Count == 0 {
					t.Fatalf("the report of a child that died: ended %q, ceiling %+v, rows %+v", env.Details.Ended, c, env.Results)
				}
				if !strings.Contains(out.String(), fmt.Sprintf("holding %d events", c.LiveEvents)) {
					t.Errorf("the table lacks the ceiling's %d events:\n%s", c.LiveEvents, out.String())
				}
				t.Logf("ceiling: live heap %.1f MiB holding %d events (%s)", float64(c.HeapLive)/(1<<20), c.LiveEvents, env.Details.Ended)
			} else if env.Details.Ended != "" {
				t.Errorf("a child that survived ended %q", env.Details.Ended)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			t.Log(strings.Join(lines[max(0, len(lines)-4):], "\n"))
		})
	}
}

// The cgroup v2 cage against a hierarchy laid out in a temporary
// directory (this machine's unified hierarchy has no memory controller):
// it finds the hierarchy with the memory controller, enables memory for
// children, writes memory.max, swap off and the child's pid, and reads
// memory.peak and memory.events back.
func TestCgroupV2(t *testing.T) {
	mk := func(t *testing.T, controllers, subtree string) string {
		root := t.TempDir()
		for name, v := range map[string]string{"cgroup.controllers": controllers, "cgroup.subtree_control": subtree} {
			if err := os.WriteFile(filepath.Join(root, name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	read := func(t *testing.T, path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t.Run("hybrid without memory", func(t *testing.T) {
		_, err := newCgroupV2([]string{filepath.Join(t.TempDir(), "absent"), mk(t, "hugetlb\n", "")}, "g", 128<<20)
		if err == nil || !strings.Contains(err.Error(), "no memory controller") {
			t.Fatalf("err %v, want no memory controller", err)
		}
	})
	t.Run("no unified hierarchy", func(t *testing.T) {
		if _, err := newCgroupV2([]string{t.TempDir()}, "g", 128<<20); err == nil || !strings.Contains(err.Error(), "no unified hierarchy") {
			t.Fatalf("err %v, want no unified hierarchy", err)
		}
	})
	for _, tc := range []struct {
		name, subtree, wantSubtree string
	}{
		{"memory off for children", "cpu io\n", "+memory"},
		{"memory on for children", "cpu memory\n", "cpu memory\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := mk(t, "cpuset cpu io memory pids\n", tc.subtree)
			c, err := newCgroupV2([]string{filepath.Join(t.TempDir(), "absent"), root}, "varve-soak-1", 128<<20)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, "varve-soak-1")
			if got := read(t, filepath.Join(root, "cgroup.subtree_control")); got != tc.wantSubtree {
				t.Errorf("cgroup.subtree_control %q, want %q", got, tc.wantSubtree)
			}
			if err := c.enter(4242); err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]string{"memory.max": "134217728", "memory.swap.max": "0", "cgroup.procs": "4242"} {
				if got := read(t, filepath.Join(dir, name)); got != want {
					t.Errorf("%s %q, want %q", name, got, want)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 17\noom 1\noom_kill 1\noom_group_kill 0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "memory.peak"), []byte("134213632\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			peak, kills, line := c.usage()
			if peak != 134213632 || kills != 1 || line != "environment: capped (cgroup v2 memory.max 128.0 MiB), peak usage 128.0 MiB, memory.events max 17, oom 1, oom_kill 1" {
				t.Errorf("usage: peak %d, %d kills, %q", peak, kills, line)
			}
			if c.describe() != "cgroup v2 memory.max 128.0 MiB" {
				t.Errorf("describe %q", c.describe())
			}
		})
	}
}

// newCage falls back, in order, and says why.
func TestNewCageFallback(t *testing.T) {
	old1, old2 := unifiedRoots, memoryCgroup
	defer func() { unifiedRoots, memoryCgroup = old1, old2 }()
	unifiedRoots, memoryCgroup = []string{filepath.Join(t.TempDir(), "absent")}, filepath.Join(t.TempDir(), "absent", "memory")
	c, tried, err := newCage(capAuto, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(addressSpace); !ok || len(tried) != 2 || !strings.HasPrefix(tried[0], "cgroup-v2: ") || !strings.HasPrefix(tried[1], "cgroup-v1: ") {
		t.Fatalf("cage %T, tried %q", c, tried)
	}
	if _, _, err := newCage(capCgroupV2, 64<<20); err == nil || !strings.Contains(err.Error(), "cgroup-v2: no unified hierarchy") {
		t.Fatalf("--cap cgroup-v2 without one: %v", err)
	}
}

// The address-space cage passes its cap and one glibc malloc arena to the
// child, unless the environment already names a number of arenas.
func TestAddressSpacePrepare(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"no arenas named", []string{"HOME=/root"}, []string{"HOME=/root", addressLimitEnv + "=134217728", "MALLOC_ARENA_MAX=1"}},
		{"arenas named", []string{"MALLOC_ARENA_MAX=4"}, []string{"MALLOC_ARENA_MAX=4", addressLimitEnv + "=134217728"}},
		{"a name that only starts alike", []string{"MALLOC_ARENA_MAX_X=4"}, []string{"MALLOC_ARENA_MAX_X=4", addressLimitEnv + "=134217728", "MALLOC_ARENA_MAX=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("true")
			cmd.Env = slices.Clone(tc.env)
			addressSpace{limit: 128 << 20}.prepare(cmd)
			if !slices.Equal(cmd.Env, tc.want) {
				t.Errorf("env %q, want %q", cmd.Env, tc.want)
			}
		})
	}
}
