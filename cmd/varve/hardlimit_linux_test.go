package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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

// The capped soak in its two short forms: sustained with the soft limit
// below a 128 MiB cap runs to the end; discovery with no soft limit under
// 64 MiB is killed by the kernel, and says so.
func TestSoakHardLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs soaks of seconds in child processes")
	}
	canCap(t)
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"sustained survives 128MiB", []string{"--hard-limit", "128MiB", "--memory-limit", "96MiB", "--duration", "20s", "--rate", "2000", "--interval", "200ms"},
			0, []string{"capped soak: survived, exit code 0", "capped (cgroup v1 memory limit 128.0 MiB)", "memory.limit_in_bytes 128.0 MiB", "oom kills 0"}},
		{"discovery killed at 64MiB", []string{"--hard-limit", "64MiB", "--mode", "discovery", "--memory-limit", "0", "--duration", "60s", "--interval", "500ms"},
			exitFailed, []string{"killed by the kernel's out-of-memory killer", "memory.limit_in_bytes 64.0 MiB"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), append([]string{"soak", "--store", "memory"}, tc.args...)...)
			cmd.Dir = t.TempDir()
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
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			t.Log(strings.Join(lines[max(0, len(lines)-3):], "\n"))
		})
	}
}
