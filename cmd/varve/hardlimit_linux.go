package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// memoryCgroup is the cgroup v1 memory hierarchy a capped soak creates its
// group under.
const memoryCgroup = "/sys/fs/cgroup/memory"

// capped runs args (a soak without --hard-limit) as a child process of
// this binary inside a new memory cgroup limited to limit bytes, with the
// child's stdout and stderr passed through. It reports how the child ended:
// its exit code, whether the kernel killed it for memory, and the cgroup's
// peak usage. Without a cgroup it can create it returns an error naming
// why, and runs nothing.
func capped(args []string, limit int64, stdout, stderr io.Writer) (code int, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(memoryCgroup, "varve-soak-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, fmt.Errorf("--hard-limit needs a memory cgroup it can create under %s: %w", memoryCgroup, err)
	}
	defer os.Remove(dir)
	write := func(name, v string) error {
		return os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644)
	}
	if err := write("memory.limit_in_bytes", strconv.FormatInt(limit, 10)); err != nil {
		return 0, fmt.Errorf("set the cgroup's memory limit: %w", err)
	}
	// Without swap the limit is hard: over it the kernel reclaims, then
	// kills.
	_ = write("memory.memsw.limit_in_bytes", strconv.FormatInt(limit, 10))
	_ = write("memory.swappiness", "0")
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = append(os.Environ(), soakEnvironment+"=capped (cgroup v1 memory limit "+mibs(uint64(limit))+")")
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	if err := write("cgroup.procs", strconv.Itoa(cmd.Process.Pid)); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, fmt.Errorf("move the soak into its cgroup: %w", err)
	}
	waitErr := cmd.Wait()
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b))
	}
	peak, _ := strconv.ParseUint(read("memory.max_usage_in_bytes"), 10, 64)
	oomKills := "0"
	for _, l := range strings.Split(read("memory.oom_control"), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			oomKills = v
		}
	}
	fmt.Fprintf(stdout, "environment: capped (cgroup v1 memory.limit_in_bytes %s), peak usage %s, failcnt %s, oom kills %s\n",
		mibs(uint64(limit)), mibs(peak), read("memory.failcnt"), oomKills)
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		fmt.Fprintln(stdout, "capped soak: survived, exit code 0")
		return 0, nil
	case errors.As(waitErr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			how := "killed by " + ws.Signal().String()
			if ws.Signal() == syscall.SIGKILL && oomKills != "0" {
				how = "killed by the kernel's out-of-memory killer (SIGKILL, oom_kill " + oomKills + ")"
			}
			fmt.Fprintf(stdout, "capped soak: %s at peak usage %s\n", how, mibs(peak))
			return exitFailed, nil
		}
		fmt.Fprintf(stdout, "capped soak: exit code %d (an allocation failure ends a Go program with exit code 2: \"fatal error: out of memory\")\n", ee.ExitCode())
		return ee.ExitCode(), nil
	default:
		return 0, waitErr
	}
}

func mibs(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
